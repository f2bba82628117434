/**
 * Cross-field rules of the configuration: what zod's per-field rules cannot say (a retained
 * tail below the threshold, a pruned result that fits, a policy's route, a model entry).
 */
import { BUILTIN_MODELS, modelKey } from './models';
import {
  DEFAULT_RETAIN_RATIO,
  DEFAULT_THRESHOLD_RATIO,
  PRUNE_MARKER_RESERVE,
  PRUNE_MARKER_RESERVE_WITH_RECALL,
  pruneSizes,
  type Fields,
  type PolicyInput,
} from './schema';
import { mergedMaxTokens, mergedRetention } from './policy';

// ---------------------------------------------------------------------------------------------
// Cross-field rules. Each works on whatever fields are present (valid), skipping rules whose
// inputs are missing, and returns messages of the form "<problem>: <fix>".
// ---------------------------------------------------------------------------------------------

export interface CrossIssue {
  path: PropertyKey[];
  message: string;
}

/** Fields as the cross-field rules see them: any may be missing (absent or invalid). */
export type CrossFields = Omit<Partial<Fields>, 'modelPolicies'> & { modelPolicies?: readonly (PolicyInput | undefined)[] };

export function crossFieldIssues(fields: CrossFields): CrossIssue[] {
  return [...summarizationPairIssues(fields), ...scopeIssues(fields, undefined, []), ...policyIssues(fields), ...pruneIssues(fields), ...modelIssues(fields)];
}

function summarizationPairIssues(fields: CrossFields): CrossIssue[] {
  const { summarizationProvider: provider, summarizationModel: model } = fields;
  if (provider === undefined || model === undefined) return [];
  const issues: CrossIssue[] = [];
  for (const [key, value] of [
    ['summarizationProvider', provider],
    ['summarizationModel', model],
  ] as const) {
    if (value !== '' && value.trim() === '') {
      issues.push({ path: [key], message: `must not be blank: give a name or leave both summarizationProvider and summarizationModel empty` });
    }
  }
  if ((provider === '') !== (model === '')) {
    const [missing, given, givenValue] =
      provider === '' ? ['summarizationProvider', 'summarizationModel', model] : ['summarizationModel', 'summarizationProvider', provider];
    issues.push({ path: [missing], message: `must be set together with ${given} (${JSON.stringify(givenValue)}): set both or neither` });
  }
  return issues;
}

/**
 * Rules for one scope: the top level (policy undefined) or one modelPolicies entry merged
 * with it. A rule is reported in the scope that set the offending value, so an inherited
 * problem is not repeated for every policy.
 */
function scopeIssues(fields: CrossFields, policy: PolicyInput | undefined, at: PropertyKey[]): CrossIssue[] {
  const scope: ScopeFields = policy ?? fields;
  const issues: CrossIssue[] = [];
  const bothRetentionForms = scope.retainRatio !== undefined && scope.retainTokens !== undefined;
  if (bothRetentionForms) {
    issues.push({
      path: [...at, 'retainTokens'],
      message: `cannot be combined with retainRatio (${scope.retainRatio}) in the same ${at.length === 0 ? 'configuration' : 'policy'}: keep only one of retainRatio and retainTokens`,
    });
  } else {
    // (With both forms given the effective retention is ambiguous: compare nothing against it.)
    issues.push(...retentionIssues(fields, policy, at));
  }
  issues.push(...prepareIssues(fields, policy, at));
  const headroom = policy?.headroomTokens ?? fields.headroomTokens;
  const headroomSetHere = policy === undefined || policy.headroomTokens !== undefined;
  if (headroom === 0 && headroomSetHere && mergedMaxTokens(fields, policy) === undefined) {
    issues.push({
      path: [...at, 'maxTokens'],
      message: `must be a positive integer when headroomTokens is 0 (maxTokens, the summary output cap, defaults to headroomTokens): set maxTokens, e.g. 8192, or raise headroomTokens`,
    });
  }
  return issues;
}

/** The effective retainRatio must be below the effective thresholdRatio. */
function retentionIssues(fields: CrossFields, policy: PolicyInput | undefined, at: PropertyKey[]): CrossIssue[] {
  const scope: ScopeFields = policy ?? fields;
  const thresholdRatio = policy?.thresholdRatio ?? fields.thresholdRatio;
  const { retainRatio } = mergedRetention(fields, policy);
  if (thresholdRatio === undefined || retainRatio === undefined || retainRatio < thresholdRatio) return [];
  if (scope.retainRatio !== undefined) {
    return [
      {
        path: [...at, 'retainRatio'],
        message: `must be lower than thresholdRatio (${thresholdRatio}${origin(fields, policy, 'thresholdRatio')}): lower retainRatio or raise thresholdRatio`,
      },
    ];
  }
  if (scope.thresholdRatio !== undefined) {
    return [
      {
        path: [...at, 'thresholdRatio'],
        message: `must be greater than retainRatio (${retainRatio}${origin(fields, policy, 'retainRatio')}): raise thresholdRatio, or set a lower retainRatio or a retainTokens`,
      },
    ];
  }
  return []; // both inherited: reported where they were set
}

/**
 * docs/spec.md#13-background-compaction: retain < prepare ≤ threshold. Checked here on the ratios (prepareRatio against
 * thresholdRatio and a retainRatio); the resolved figures are checked again per route at budget
 * time, where a retainTokens or the headroom can move them.
 */
function prepareIssues(fields: CrossFields, policy: PolicyInput | undefined, at: PropertyKey[]): CrossIssue[] {
  const prepareRatio = policy === undefined ? fields.prepareRatio : policy.prepareRatio;
  if (prepareRatio === undefined) return [];
  const thresholdRatio = policy?.thresholdRatio ?? fields.thresholdRatio;
  const { retainRatio } = mergedRetention(fields, policy);
  if (thresholdRatio !== undefined && prepareRatio > thresholdRatio) {
    return [
      {
        path: [...at, 'prepareRatio'],
        message: `must not be above thresholdRatio (${thresholdRatio}): the summary is prepared before the threshold, not after`,
      },
    ];
  }
  if (retainRatio !== undefined && prepareRatio <= retainRatio) {
    return [
      {
        path: [...at, 'prepareRatio'],
        message: `must be above retainRatio (${retainRatio}): a prepare point inside the retained tail has nothing to summarize`,
      },
    ];
  }
  return [];
}

type ScopeFields = Partial<Pick<Fields, 'thresholdRatio' | 'retainRatio' | 'retainTokens' | 'headroomTokens' | 'maxTokens'>>;

/** Where an inherited value came from, for messages ('' when set in the scope itself). */
function origin(fields: CrossFields, policy: PolicyInput | undefined, key: 'thresholdRatio' | 'retainRatio'): string {
  if (policy?.[key] !== undefined) return '';
  if (key === 'retainRatio' && fields.retainRatio === undefined) return ', the default';
  return policy === undefined ? '' : `, from config.${key}`;
}

function policyIssues(fields: CrossFields): CrossIssue[] {
  const policies = fields.modelPolicies;
  if (policies === undefined) return [];
  const issues: CrossIssue[] = [];
  const firstIndex = new Map<string, number>();
  policies.forEach((policy, index) => {
    if (policy === undefined) return; // invalid on its own; already reported
    const key = modelKey(policy.provider, policy.model);
    const first = firstIndex.get(key);
    if (first !== undefined) {
      issues.push({ path: ['modelPolicies', index], message: `duplicates modelPolicies[${first}] (${key}): merge the two entries into one` });
    } else {
      firstIndex.set(key, index);
    }
    issues.push(...scopeIssues(fields, policy, ['modelPolicies', index]));
  });
  return issues;
}

function pruneIssues(fields: CrossFields): CrossIssue[] {
  const prune = fields.prune;
  if (prune === undefined) return [];
  // With recall on for any route, a marker may also name its handle.
  const recall = fields.recall === true || (fields.modelPolicies ?? []).some((p) => p?.recall === true);
  const reserve = recall ? PRUNE_MARKER_RESERVE_WITH_RECALL : PRUNE_MARKER_RESERVE;
  // Without a threshold the window's default is raised to fit head + marker + tail (pruneSizes): nothing to refuse.
  if (prune.thresholdChars === undefined) return [];
  const { headChars, tailChars, thresholdChars } = pruneSizes(prune, undefined, reserve);
  const needed = headChars + reserve + tailChars;
  if (needed <= thresholdChars) return [];
  // Reported on the prune object: any of the three (or their defaults) may be the one to change.
  return [
    {
      path: ['prune'],
      message: `does not fit a pruned result in thresholdChars: headChars + marker${recall ? ' (with its recall handle)' : ''} + tailChars = ${headChars} + ${reserve} + ${tailChars} = ${needed} > thresholdChars ${thresholdChars}: lower headChars or tailChars, or raise thresholdChars to at least ${needed}`,
    },
  ];
}

function modelIssues(fields: CrossFields): CrossIssue[] {
  const models = fields.models;
  if (models === undefined) return [];
  const issues: CrossIssue[] = [];
  for (const [key, entry] of Object.entries(models)) {
    const slash = key.indexOf('/');
    if (slash <= 0 || slash === key.length - 1) {
      issues.push({ path: ['models', key], message: `has a key that is not "provider/model": write the key as e.g. "openai/${key || 'gpt-4o'}"` });
      continue;
    }
    // A tokenize endpoint is only asked by the server tokenizer: given with another, it would be silently unused.
    if (entry.tokenizerUrl !== undefined && (entry.tokenizer ?? fields.tokenizer) !== 'server') {
      issues.push({
        path: ['models', key, 'tokenizerUrl'],
        message: `is only used with tokenizer "server" (this model counts with ${JSON.stringify(entry.tokenizer ?? fields.tokenizer ?? 'o200k_base')}): set tokenizer: "server" or remove tokenizerUrl`,
      });
    }
    const builtin = Object.hasOwn(BUILTIN_MODELS, key) ? BUILTIN_MODELS[key] : undefined;
    const contextWindow = entry.contextWindow ?? builtin?.contextWindow;
    if (contextWindow === undefined) {
      issues.push({
        path: ['models', key, 'contextWindow'],
        message: `is required for a model without a built-in entry: set contextWindow to the model's context window in tokens`,
      });
      continue;
    }
    const maxOutputTokens = entry.maxOutputTokens ?? builtin?.maxOutputTokens;
    if (maxOutputTokens !== undefined && maxOutputTokens >= contextWindow) {
      const blamed = entry.maxOutputTokens !== undefined ? 'maxOutputTokens' : 'contextWindow';
      issues.push({
        path: ['models', key, blamed],
        message: `leaves no room for input: maxOutputTokens (${maxOutputTokens}) must be lower than contextWindow (${contextWindow}): lower maxOutputTokens or raise contextWindow`,
      });
    }
  }
  return issues;
}
