/**
 * Per-model policies: the top level merged with a route's modelPolicies entry, and the model
 * figures and tokenizer a route resolves to.
 */
import { DEFAULT_TOKENIZER, modelKey, resolveModel, type ModelInfo } from './models';
import type { TokenizerName } from '../metering';
import { DEFAULT_RETAIN_RATIO, type EffectivePolicy, type Fields, type ModelPolicy, type ModelPolicyOverride, type PolicyInput } from './schema';

// ---------------------------------------------------------------------------------------------
// Resolution (the transform): defaults that depend on other fields, merged policies.
// ---------------------------------------------------------------------------------------------

/** The parsed configuration: what `parseConfig` returns (the schema's output is this transform's result). */
export type CompactionConfig = ReturnType<typeof resolveConfig>;

export function resolveConfig(fields: Fields) {
  const {
    modelPolicies,
    thresholdRatio,
    headroomTokens,
    retainRatio,
    retainTokens,
    maxTokens,
    userWordsTokens,
    compactionRetries,
    maxOverflowRetries,
    auto,
    background,
    backgroundCommit,
    prepareRatio,
    summaryIdleTimeoutMs,
    summaryTimeoutMs,
    recall,
    ...rest
  } = fields;
  const overrides: ModelPolicyOverride[] = modelPolicies.map((policy) => ({
    provider: policy.provider,
    model: policy.model,
    ...mergePolicy(fields, policy),
  }));
  return { ...mergePolicy(fields, undefined), ...rest, modelPolicies: overrides };
}

/**
 * A policy's fields over the top level's. Retention is taken as a whole from the most specific
 * scope that gives one (a policy's retainTokens replaces a global retainRatio). maxTokens:
 * an explicit per-model cap, else an explicit global cap, else the resolved headroom.
 */
type MergeFields = Pick<
  Fields,
  | 'thresholdRatio'
  | 'headroomTokens'
  | 'retainRatio'
  | 'retainTokens'
  | 'maxTokens'
  | 'userWordsTokens'
  | 'compactionRetries'
  | 'maxOverflowRetries'
  | 'auto'
  | 'background'
  | 'backgroundCommit'
  | 'prepareRatio'
  | 'recall'
  | 'summaryIdleTimeoutMs'
  | 'summaryTimeoutMs'
>;

function mergePolicy(fields: MergeFields, policy: PolicyInput | undefined): ModelPolicy {
  const headroomTokens = policy?.headroomTokens ?? fields.headroomTokens;
  return {
    thresholdRatio: policy?.thresholdRatio ?? fields.thresholdRatio,
    headroomTokens,
    ...mergedRetention(fields, policy),
    maxTokens: mergedMaxTokens(fields, policy),
    userWordsTokens: policy?.userWordsTokens ?? fields.userWordsTokens,
    compactionRetries: policy?.compactionRetries ?? fields.compactionRetries,
    maxOverflowRetries: policy?.maxOverflowRetries ?? fields.maxOverflowRetries,
    auto: policy?.auto ?? fields.auto,
    background: policy?.background ?? fields.background,
    backgroundCommit: policy?.backgroundCommit ?? fields.backgroundCommit,
    prepareRatio: policy?.prepareRatio ?? fields.prepareRatio,
    recall: policy?.recall ?? fields.recall,
    summaryIdleTimeoutMs: policy?.summaryIdleTimeoutMs ?? fields.summaryIdleTimeoutMs,
    summaryTimeoutMs: policy?.summaryTimeoutMs ?? fields.summaryTimeoutMs,
  };
}

type Retention = { retainRatio: number; retainTokens?: undefined } | { retainTokens: number; retainRatio?: undefined };
type RetentionFields = { retainRatio?: number | undefined; retainTokens?: number | undefined };

export function mergedRetention(fields: RetentionFields, policy: RetentionFields | undefined): Retention {
  return retentionOf(policy) ?? retentionOf(fields) ?? { retainRatio: DEFAULT_RETAIN_RATIO };
}

function retentionOf(scope: RetentionFields | undefined): Retention | undefined {
  if (scope?.retainTokens !== undefined) return { retainTokens: scope.retainTokens };
  if (scope?.retainRatio !== undefined) return { retainRatio: scope.retainRatio };
  return undefined;
}

/** An explicit cap, if any: an unset one follows the resolved headroom at budget time. */
export function mergedMaxTokens(fields: { maxTokens?: number | undefined }, policy: { maxTokens?: number | undefined } | undefined): number | undefined {
  return policy?.maxTokens ?? fields.maxTokens;
}

/** The merged policy for a route: the exact provider/model override, else the top level. */
export function policyFor(config: CompactionConfig, provider: string, model: string): EffectivePolicy {
  const override = config.modelPolicies.find((p) => p.provider === provider && p.model === model);
  if (override) return { ...override, overridden: true };
  const {
    thresholdRatio,
    headroomTokens,
    retainRatio,
    retainTokens,
    maxTokens,
    userWordsTokens,
    compactionRetries,
    maxOverflowRetries,
    auto,
    background,
    backgroundCommit,
    prepareRatio,
    summaryIdleTimeoutMs,
    summaryTimeoutMs,
    recall,
  } = config;
  return {
    provider,
    model,
    thresholdRatio,
    headroomTokens,
    ...mergedRetention({ retainRatio, retainTokens }, undefined),
    maxTokens,
    userWordsTokens,
    compactionRetries,
    maxOverflowRetries,
    auto,
    background,
    backgroundCommit,
    prepareRatio,
    recall,
    summaryIdleTimeoutMs,
    summaryTimeoutMs,
    overridden: false,
  };
}

/** A route's model figures: built-in entry overridden by `config.models`. */
export function modelInfoFor(config: CompactionConfig, provider: string, model: string): ModelInfo | undefined {
  return resolveModel(modelKey(provider, model), config.models);
}

/** The tokenizer for a route: `config.tokenizer` forces one; else the model's; else o200k_base. */
export function tokenizerNameFor(config: CompactionConfig, provider: string, model: string): TokenizerName {
  return config.tokenizer ?? modelInfoFor(config, provider, model)?.tokenizer ?? DEFAULT_TOKENIZER;
}
