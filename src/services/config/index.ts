/**
 * Configuration (docs/spec.md#3-configuration plus the engine's own fields): validation of a config object (every
 * problem listed at once) and the public face of the config modules: the schema and defaults
 * (config-schema.ts), cross-field rules (config-rules.ts), per-model policies (config-policy.ts),
 * budgets (config-budget.ts) and messages (config-messages.ts).
 */
import { z } from 'zod';
import { XcompactError } from '../../errors';
import { FIELDS, ConfigFieldsSchema, ModelEntrySchema, ModelPolicySchema } from './schema';
import { crossFieldIssues, type CrossFields } from './rules';
import { resolveConfig } from './policy';
import { describeIssue, isPlainObject, type ConfigIssue, type RawIssue } from './messages';

export {
  DEFAULT_THRESHOLD_RATIO,
  DEFAULT_HEADROOM_TOKENS,
  DEFAULT_RETAIN_RATIO,
  PRUNE_MARKER_RESERVE,
  PRUNE_MARKER_RESERVE_WITH_RECALL,
  PRUNE_MARKER_MAX_CHARS,
  defaultHeadroom,
  defaultOutputReservation,
  pruneSizes,
  ConfigFieldsSchema,
  type EffectivePolicy,
  type ModelPolicy,
  type ModelPolicyOverride,
} from './schema';
export { policyFor, modelInfoFor, tokenizerNameFor } from './policy';
export { BudgetError, missingCapacity, resolveBudget, type BudgetArgs, type BudgetErrorCode, type ResolvedBudget } from './budget';
export type { ConfigIssue } from './messages';

export const ConfigSchema = ConfigFieldsSchema.superRefine(
  (value, ctx) => {
    for (const issue of crossFieldIssues(value)) ctx.addIssue({ code: 'custom', path: issue.path, message: issue.message });
  },
  // Only on values whose every field is valid (zod would otherwise run it after a failed range
  // check). parseConfig runs the same rules on the valid fields when this was skipped.
  { when: (payload) => payload.issues.length === 0 },
).transform(resolveConfig);

export type CompactionConfigInput = z.input<typeof ConfigSchema>;
export type { CompactionConfig } from './policy';
import type { CompactionConfig } from './policy';

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/** The configuration is invalid; `issues` lists every problem, the message one per line. */
export class ConfigError extends XcompactError {
  readonly issues: readonly ConfigIssue[];

  constructor(issues: readonly ConfigIssue[]) {
    const count = issues.length === 1 ? '1 problem' : `${issues.length} problems`;
    super('config', [`invalid xcompact configuration (${count}):`, ...issues.map((i) => `  ${i.message}`)].join('\n'));
    this.issues = issues;
  }
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/** Validates and resolves a configuration; throws ConfigError listing every problem. */
export function parseConfig(input: unknown): CompactionConfig {
  const raw = input === undefined ? {} : input;
  const result = ConfigSchema.safeParse(raw);
  if (result.success) return result.data;
  const issues: RawIssue[] = result.error.issues.flatMap(splitUnknownKeys);
  // zod skips refinements once a field failed its own rule; run the cross-field rules on the
  // fields that are valid, so that a single report lists everything.
  if (!issues.some((issue) => issue.code === 'custom') && isPlainObject(raw)) {
    issues.push(...crossFieldIssues(salvageFields(raw)).map((issue) => ({ ...issue, code: 'custom' as const })));
  }
  throw new ConfigError(issues.map((issue) => describeIssue(issue, raw)));
}

/** One issue per unknown key, pointing at the key itself. */
function splitUnknownKeys(issue: z.core.$ZodIssue): RawIssue[] {
  if (issue.code !== 'unrecognized_keys') return [issue];
  return issue.keys.map((key) => ({ code: 'unrecognized_key', path: [...issue.path, key], message: issue.message }));
}

/**
 * The fields that pass their own rules, parsed (defaults applied). Policies and model entries
 * are salvaged one by one (an invalid policy leaves a hole, keeping the indices of the others).
 */
function salvageFields(raw: Record<string, unknown>): CrossFields {
  const salvaged: Record<string, unknown> = {};
  for (const [key, schema] of Object.entries(FIELDS)) {
    const parsed = (schema as z.ZodType).safeParse(raw[key]);
    if (parsed.success) salvaged[key] = parsed.data;
  }
  const policies = raw.modelPolicies;
  if (Array.isArray(policies)) salvaged.modelPolicies = policies.map((p) => ModelPolicySchema.safeParse(p).data);
  const models = raw.models;
  if (isPlainObject(models)) {
    salvaged.models = Object.fromEntries(
      Object.entries(models).flatMap(([key, entry]) => {
        const parsed = ModelEntrySchema.safeParse(entry);
        return parsed.success ? [[key, parsed.data]] : [];
      }),
    );
  }
  return salvaged;
}

export * from './models';
