/**
 * Configuration (SPEC §3 plus the engine's own fields): a zod schema that is the single source
 * of the config types, load-time validation whose messages name the field, the value and the
 * fix, per-model policy merging, and budget resolution for a routed model.
 */
import { PRUNE_MARKER_MAX_CHARS } from './pruner.js';
import { z } from 'zod';
import { XcompactError } from '../errors.js';
import { BUILTIN_MODELS, DEFAULT_TOKENIZER, modelKey, resolveModel, type ModelInfo } from './models.js';
import { TOKENIZER_NAMES, type TokenizerName } from './tokenizers/types.js';

// ---------------------------------------------------------------------------------------------
// Defaults
// ---------------------------------------------------------------------------------------------

export const DEFAULT_THRESHOLD_RATIO = 0.8;
export const DEFAULT_HEADROOM_TOKENS = 65_536;

/**
 * Headroom when none is configured: the reference's 65 536 tokens, but never more than an
 * eighth of the window. A fixed 65 536 leaves no pressure budget at all below ~70k tokens, so
 * every local model (llama.cpp, Ollama, vLLM at 8k–32k) would have no automatic compaction
 * out of the box; for windows of 512k and more the two are the same.
 */
export function defaultHeadroom(window: number): number {
  return Math.min(DEFAULT_HEADROOM_TOKENS, Math.floor(window / 8));
}
/** Applies only when neither retainRatio nor retainTokens is given (at any level). */
export const DEFAULT_RETAIN_RATIO = 0.16;

/**
 * Code points the pruner's marker line may use (including its newlines): the pruner owns the
 * figure, the config checks head + marker + tail against thresholdChars with it.
 */
export const PRUNE_MARKER_RESERVE = PRUNE_MARKER_MAX_CHARS;

// ---------------------------------------------------------------------------------------------
// Schema: per-field rules. Rules across fields live in crossFieldIssues() so that they can
// also run when some unrelated field is invalid (one report lists every problem).
// ---------------------------------------------------------------------------------------------

const ratio = () => z.number().gt(0).lte(1); // (0, 1]
const nonNegativeInt = () => z.int().min(0);
const positiveInt = () => z.int().min(1);
const name = () => z.string().min(1);

/** Fields a model policy may override. Optional here: merging needs to know what was given. */
const POLICY_FIELDS = {
  thresholdRatio: ratio().optional(),
  headroomTokens: nonNegativeInt().optional(),
  retainRatio: ratio().optional(),
  retainTokens: nonNegativeInt().optional(),
  maxTokens: positiveInt().optional(),
  compactionRetries: nonNegativeInt().optional(),
  maxOverflowRetries: nonNegativeInt().optional(),
  auto: z.boolean().optional(),
};

const ModelPolicySchema = z.strictObject({ provider: name(), model: name(), ...POLICY_FIELDS });

const CircuitBreakerSchema = z.strictObject({
  failureLimit: positiveInt().default(3),
  cooldownMs: nonNegativeInt().default(300_000),
});

const PruneSchema = z.strictObject({
  enabled: z.boolean().default(true),
  thresholdChars: positiveInt().default(8192),
  headChars: nonNegativeInt().default(4096),
  tailChars: nonNegativeInt().default(1024),
  /** Newest tool results within this many tokens are never pruned (default: the retained tail). */
  protectRecentTokens: nonNegativeInt().optional(),
  /** Skip a prune pass that would free less (default: max(512, 2% of the window)). */
  minReclaimTokens: nonNegativeInt().optional(),
  /** Tool names whose results are never pruned. */
  neverPrune: z.array(name()).default([]),
});

const ModelEntrySchema = z.strictObject({
  contextWindow: positiveInt().optional(),
  maxOutputTokens: positiveInt().optional(),
  tokenizer: z.enum(TOKENIZER_NAMES).optional(),
  outputCapField: z.enum(['max_tokens', 'max_completion_tokens']).optional(),
});

const FIELDS = {
  ...POLICY_FIELDS,
  thresholdRatio: ratio().default(DEFAULT_THRESHOLD_RATIO),
  // No default here: an unset headroom scales with the window (defaultHeadroom) at budget time.
  headroomTokens: nonNegativeInt().optional(),
  compactionRetries: nonNegativeInt().default(1),
  maxOverflowRetries: nonNegativeInt().default(1),
  auto: z.boolean().default(true),
  summarizationProvider: z.string().default(''),
  summarizationModel: z.string().default(''),
  modelPolicies: z.array(ModelPolicySchema).default([]),
  circuitBreaker: CircuitBreakerSchema.prefault({}), // prefault: parse {} so inner defaults apply
  minProgressRatio: z.number().min(0).lt(1).default(0.1),
  prune: PruneSchema.prefault({}),
  tokenizer: z.enum(TOKENIZER_NAMES).optional(),
  models: z.record(z.string(), ModelEntrySchema).default({}),
};

/** The config object before cross-field rules and resolution (its shape lists every field). */
export const ConfigFieldsSchema = z.strictObject(FIELDS);
const FieldsSchema = ConfigFieldsSchema;
type Fields = z.output<typeof FieldsSchema>;
type PolicyInput = z.output<typeof ModelPolicySchema>;

export const ConfigSchema = FieldsSchema.superRefine(
  (value, ctx) => {
    for (const issue of crossFieldIssues(value)) ctx.addIssue({ code: 'custom', path: issue.path, message: issue.message });
  },
  // Only on values whose every field is valid (zod would otherwise run it after a failed range
  // check). parseConfig runs the same rules on the valid fields when this was skipped.
  { when: (payload) => payload.issues.length === 0 },
).transform(resolveConfig);

export type CompactionConfigInput = z.input<typeof ConfigSchema>;
export type CompactionConfig = z.output<typeof ConfigSchema>;

/** A model policy after merging with the top level: every field resolved. */
export interface ModelPolicy {
  thresholdRatio: number;
  /** Undefined: defaultHeadroom(window), resolved per model by resolveBudget. */
  headroomTokens: number | undefined;
  /** Exactly one of retainRatio and retainTokens is set. */
  retainRatio?: number;
  retainTokens?: number;
  /** Summary output cap; undefined: the resolved headroom. */
  maxTokens: number | undefined;
  compactionRetries: number;
  maxOverflowRetries: number;
  auto: boolean;
}

export interface ModelPolicyOverride extends ModelPolicy {
  provider: string;
  model: string;
}

/** The policy that applies to one route; `overridden` when a modelPolicies entry matched. */
export interface EffectivePolicy extends ModelPolicyOverride {
  overridden: boolean;
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

export interface ConfigIssue {
  /** e.g. `config.modelPolicies[0].thresholdRatio` */
  path: string;
  /** One line naming the field, the value received and the fix. */
  message: string;
}

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

interface RawIssue {
  code: string;
  path: PropertyKey[];
  message: string;
  expected?: unknown;
  minimum?: unknown;
  maximum?: unknown;
  inclusive?: boolean;
  origin?: unknown;
  values?: unknown[];
}

/** One issue per unknown key, pointing at the key itself. */
function splitUnknownKeys(issue: z.core.$ZodIssue): RawIssue[] {
  if (issue.code !== 'unrecognized_keys') return [issue as RawIssue];
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
  return salvaged as CrossFields;
}

// ---------------------------------------------------------------------------------------------
// Cross-field rules. Each works on whatever fields are present (valid), skipping rules whose
// inputs are missing, and returns messages of the form "<problem>: <fix>".
// ---------------------------------------------------------------------------------------------

interface CrossIssue {
  path: PropertyKey[];
  message: string;
}

/** Fields as the cross-field rules see them: any may be missing (absent or invalid). */
type CrossFields = Omit<Partial<Fields>, 'modelPolicies'> & { modelPolicies?: readonly (PolicyInput | undefined)[] };

function crossFieldIssues(fields: CrossFields): CrossIssue[] {
  return [
    ...summarizationPairIssues(fields),
    ...scopeIssues(fields, undefined, []),
    ...policyIssues(fields),
    ...pruneIssues(fields),
    ...modelIssues(fields),
  ];
}

function summarizationPairIssues(fields: CrossFields): CrossIssue[] {
  const { summarizationProvider: provider, summarizationModel: model } = fields;
  if (provider === undefined || model === undefined) return [];
  const issues: CrossIssue[] = [];
  for (const [key, value] of [['summarizationProvider', provider], ['summarizationModel', model]] as const) {
    if (value !== '' && value.trim() === '') {
      issues.push({ path: [key], message: `must not be blank: give a name or leave both summarizationProvider and summarizationModel empty` });
    }
  }
  if ((provider === '') !== (model === '')) {
    const [missing, given, givenValue] = provider === '' ? ['summarizationProvider', 'summarizationModel', model] : ['summarizationModel', 'summarizationProvider', provider];
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
  const { headChars, tailChars, thresholdChars } = prune;
  const needed = headChars + PRUNE_MARKER_RESERVE + tailChars;
  if (needed <= thresholdChars) return [];
  // Reported on the prune object: any of the three (or their defaults) may be the one to change.
  return [
    {
      path: ['prune'],
      message: `does not fit a pruned result in thresholdChars: headChars + marker + tailChars = ${headChars} + ${PRUNE_MARKER_RESERVE} + ${tailChars} = ${needed} > thresholdChars ${thresholdChars}: lower headChars or tailChars, or raise thresholdChars to at least ${needed}`,
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
    const builtin = Object.hasOwn(BUILTIN_MODELS, key) ? BUILTIN_MODELS[key] : undefined;
    const contextWindow = entry.contextWindow ?? builtin?.contextWindow;
    if (contextWindow === undefined) {
      issues.push({ path: ['models', key, 'contextWindow'], message: `is required for a model without a built-in entry: set contextWindow to the model's context window in tokens` });
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

// ---------------------------------------------------------------------------------------------
// Resolution (the transform): defaults that depend on other fields, merged policies.
// ---------------------------------------------------------------------------------------------

function resolveConfig(fields: Fields) {
  const { modelPolicies, thresholdRatio, headroomTokens, retainRatio, retainTokens, maxTokens, compactionRetries, maxOverflowRetries, auto, ...rest } = fields;
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
type MergeFields = Pick<Fields, 'thresholdRatio' | 'headroomTokens' | 'retainRatio' | 'retainTokens' | 'maxTokens' | 'compactionRetries' | 'maxOverflowRetries' | 'auto'>;

function mergePolicy(fields: MergeFields, policy: PolicyInput | undefined): ModelPolicy {
  const headroomTokens = policy?.headroomTokens ?? fields.headroomTokens;
  return {
    thresholdRatio: policy?.thresholdRatio ?? fields.thresholdRatio,
    headroomTokens,
    ...mergedRetention(fields, policy),
    maxTokens: mergedMaxTokens(fields, policy),
    compactionRetries: policy?.compactionRetries ?? fields.compactionRetries,
    maxOverflowRetries: policy?.maxOverflowRetries ?? fields.maxOverflowRetries,
    auto: policy?.auto ?? fields.auto,
  };
}

type Retention = { retainRatio: number; retainTokens?: undefined } | { retainTokens: number; retainRatio?: undefined };
type RetentionFields = { retainRatio?: number | undefined; retainTokens?: number | undefined };

function mergedRetention(fields: RetentionFields, policy: RetentionFields | undefined): Retention {
  return retentionOf(policy) ?? retentionOf(fields) ?? { retainRatio: DEFAULT_RETAIN_RATIO };
}

function retentionOf(scope: RetentionFields | undefined): Retention | undefined {
  if (scope?.retainTokens !== undefined) return { retainTokens: scope.retainTokens };
  if (scope?.retainRatio !== undefined) return { retainRatio: scope.retainRatio };
  return undefined;
}

/** An explicit cap, if any: an unset one follows the resolved headroom at budget time. */
function mergedMaxTokens(fields: { maxTokens?: number | undefined }, policy: { maxTokens?: number | undefined } | undefined): number | undefined {
  return policy?.maxTokens ?? fields.maxTokens;
}

/** The merged policy for a route: the exact provider/model override, else the top level. */
export function policyFor(config: CompactionConfig, provider: string, model: string): EffectivePolicy {
  const override = config.modelPolicies.find((p) => p.provider === provider && p.model === model);
  if (override) return { ...override, overridden: true };
  const { thresholdRatio, headroomTokens, retainRatio, retainTokens, maxTokens, compactionRetries, maxOverflowRetries, auto } = config;
  return { provider, model, thresholdRatio, headroomTokens, ...mergedRetention({ retainRatio, retainTokens }, undefined), maxTokens, compactionRetries, maxOverflowRetries, auto, overridden: false };
}

/** A route's model figures: built-in entry overridden by `config.models`. */
export function modelInfoFor(config: CompactionConfig, provider: string, model: string): ModelInfo | undefined {
  return resolveModel(modelKey(provider, model), config.models);
}

/** The tokenizer for a route: `config.tokenizer` forces one; else the model's; else o200k_base. */
export function tokenizerNameFor(config: CompactionConfig, provider: string, model: string): TokenizerName {
  return config.tokenizer ?? modelInfoFor(config, provider, model)?.tokenizer ?? DEFAULT_TOKENIZER;
}

// ---------------------------------------------------------------------------------------------
// Budget resolution (SPEC §3)
// ---------------------------------------------------------------------------------------------

export type BudgetErrorCode = 'no-context-capacity' | 'no-message-budget' | 'no-pressure-budget' | 'retain-not-below-threshold';

/** A route's budget cannot be resolved; the message names the route, the figures and the fix. */
export class BudgetError extends XcompactError {
  declare readonly code: BudgetErrorCode;
  readonly provider: string;
  readonly model: string;

  constructor(code: BudgetErrorCode, provider: string, model: string, message: string) {
    super(code, message);
    this.provider = provider;
    this.model = model;
  }
}

export interface ResolvedBudget {
  /** W */
  window: number;
  /** O: request max_tokens, else the model's default output, else 0. */
  outputReservation: number;
  /** B */
  headroomTokens: number;
  /** M = W − O */
  messageBudget: number;
  /** P = M − B */
  pressureBudget: number;
  /** floor(min(W × thresholdRatio, P)); pressure qualifies at >= threshold. */
  threshold: number;
  /** Recent tokens kept verbatim: retainTokens ?? floor(M × retainRatio); below threshold. */
  retain: number;
  /** Summary output cap. */
  maxTokens: number;
  /** Newest tool results within this many tokens are not pruned (default: retain). */
  protectRecentTokens: number;
  /** A prune pass must free at least this much (default: max(512, floor(2% of W))). */
  minReclaimTokens: number;
  policy: EffectivePolicy;
}

export interface BudgetArgs {
  config: CompactionConfig;
  provider: string;
  model: string;
  contextWindow: number | undefined;
  requestMaxTokens?: number;
  modelMaxOutputTokens?: number;
}

export function resolveBudget(args: BudgetArgs): ResolvedBudget {
  const { config, provider, model, contextWindow: window, requestMaxTokens, modelMaxOutputTokens } = args;
  const route = modelKey(provider, model);
  const policy = policyFor(config, provider, model);
  const fail = (code: BudgetErrorCode, message: string): never => {
    throw new BudgetError(code, provider, model, `${route}: ${message}`);
  };

  if (window === undefined || !Number.isInteger(window) || window <= 0) {
    fail(
      'no-context-capacity',
      `no context capacity known (contextWindow = ${String(window)}): add models: { ${JSON.stringify(route)}: { contextWindow: <tokens> } } to the configuration (overflow recovery works without it)`,
    );
  }
  const W = window as number;
  const outputSource = requestMaxTokens !== undefined ? "the request's max_tokens" : modelMaxOutputTokens !== undefined ? "the model's maxOutputTokens" : 'none';
  const O = requestMaxTokens ?? modelMaxOutputTokens ?? 0;
  const M = W - O;
  if (!(M > 0)) {
    const fix = requestMaxTokens !== undefined ? `lower the request's max_tokens below ${W}` : `lower models[${JSON.stringify(route)}].maxOutputTokens below ${W}, or set max_tokens on the request`;
    fail('no-message-budget', `no message budget: window ${W} − output reservation ${O} (${outputSource}) = ${M} tokens: ${fix}`);
  }
  const B = policy.headroomTokens ?? defaultHeadroom(W);
  const P = M - B;
  if (!(P > 0)) {
    fail(
      'no-pressure-budget',
      `no pressure budget: message budget ${M} (window ${W} − output ${O}) − headroomTokens ${B} = ${P} tokens: set headroomTokens below ${M}, e.g. modelPolicies: [{ provider: ${JSON.stringify(provider)}, model: ${JSON.stringify(model)}, headroomTokens: ${Math.floor(M / 4)} }]`,
    );
  }
  const threshold = Math.floor(Math.min(floorProduct(W, policy.thresholdRatio), P));
  const retain = policy.retainTokens ?? floorProduct(M, policy.retainRatio ?? DEFAULT_RETAIN_RATIO);
  if (!(retain < threshold)) {
    const retainSource = policy.retainTokens !== undefined ? 'retainTokens' : `floor(${M} × retainRatio ${policy.retainRatio})`;
    fail(
      'retain-not-below-threshold',
      `retained tail ${retain} (${retainSource}) must be below the threshold ${threshold} (floor(min(${W} × thresholdRatio ${policy.thresholdRatio}, ${P}))): lower retainTokens/retainRatio, raise thresholdRatio or lower headroomTokens`,
    );
  }
  return {
    window: W,
    outputReservation: O,
    headroomTokens: B,
    messageBudget: M,
    pressureBudget: P,
    threshold,
    retain,
    maxTokens: policy.maxTokens ?? B,
    protectRecentTokens: config.prune.protectRecentTokens ?? retain,
    minReclaimTokens: config.prune.minReclaimTokens ?? Math.max(512, floorProduct(W, 0.02)),
    policy,
  };
}

/**
 * floor(n × ratio) as the decimal arithmetic a user expects: 744000 × 0.16 must give 119040
 * even where the binary product lands a hair below an integer (100 × 0.29 = 28.999…).
 */
function floorProduct(n: number, ratio: number): number {
  const product = n * ratio;
  const nearest = Math.round(product);
  return Math.abs(product - nearest) <= 1e-9 * Math.max(1, Math.abs(product)) ? nearest : Math.floor(product);
}

// ---------------------------------------------------------------------------------------------
// Messages: "<path> = <value> <problem>: <fix>"
// ---------------------------------------------------------------------------------------------

/** What to write instead, per field (by the field's own name). */
const FIELD_HINTS: Record<string, string> = {
  thresholdRatio: `use a number greater than 0 and at most 1 (default ${DEFAULT_THRESHOLD_RATIO})`,
  headroomTokens: `use a whole number of tokens ≥ 0 (default ${DEFAULT_HEADROOM_TOKENS})`,
  retainRatio: `use a number greater than 0 and at most 1, below thresholdRatio (default ${DEFAULT_RETAIN_RATIO})`,
  retainTokens: 'use a whole number of tokens ≥ 0, or retainRatio instead',
  summarizationProvider: 'use a provider name such as "openai", together with summarizationModel',
  summarizationModel: 'use a model name such as "gpt-4o-mini", together with summarizationProvider',
  maxTokens: 'use a whole number of tokens ≥ 1 (default: headroomTokens)',
  compactionRetries: 'use a whole number ≥ 0 (default 1)',
  maxOverflowRetries: 'use a whole number ≥ 0 (default 1; 0 disables overflow recovery)',
  auto: 'use true or false (default true)',
  modelPolicies: 'use an array of { provider, model, ...overrides }',
  provider: 'use the provider name, e.g. "openai"',
  model: 'use the model name, e.g. "gpt-4o"',
  circuitBreaker: 'use { failureLimit, cooldownMs }',
  failureLimit: 'use a whole number ≥ 1 (default 3)',
  cooldownMs: 'use a whole number of milliseconds ≥ 0 (default 300000)',
  minProgressRatio: 'use a number ≥ 0 and below 1 (default 0.1)',
  prune: 'use { enabled, thresholdChars, headChars, tailChars, protectRecentTokens, minReclaimTokens, neverPrune }',
  enabled: 'use true or false (default true)',
  thresholdChars: 'use a whole number of characters ≥ 1 (default 8192)',
  headChars: 'use a whole number of characters ≥ 0 (default 4096)',
  tailChars: 'use a whole number of characters ≥ 0 (default 1024)',
  protectRecentTokens: 'use a whole number of tokens ≥ 0 (default: the retained tail)',
  minReclaimTokens: 'use a whole number of tokens ≥ 0 (default: max(512, 2% of the window))',
  neverPrune: 'use an array of tool names, e.g. ["read"]',
  tokenizer: `use one of ${TOKENIZER_NAMES.map((n) => JSON.stringify(n)).join(', ')}`,
  models: 'use an object keyed "provider/model", e.g. { "openai/gpt-4o": { contextWindow: 128000 } }',
  contextWindow: 'use the context window as a whole number of tokens ≥ 1',
  maxOutputTokens: 'use a whole number of tokens ≥ 1',
};

/** Known keys of each object, for "did you mean" suggestions. */
function knownKeysAt(path: PropertyKey[]): string[] {
  const [head] = path;
  if (path.length === 0) return Object.keys(FIELDS);
  if (head === 'modelPolicies' && path.length === 2) return Object.keys(ModelPolicySchema.shape);
  if (head === 'prune' && path.length === 1) return Object.keys(PruneSchema.shape);
  if (head === 'circuitBreaker' && path.length === 1) return Object.keys(CircuitBreakerSchema.shape);
  if (head === 'models' && path.length === 2) return Object.keys(ModelEntrySchema.shape);
  return [];
}

function describeIssue(issue: RawIssue, raw: unknown): ConfigIssue {
  const path = formatPath(issue.path);
  const value = formatValue(valueAt(raw, issue.path));
  return { path, message: `${path} = ${value} ${problemOf(issue)}` };
}

function problemOf(issue: RawIssue): string {
  const field = fieldName(issue.path);
  const hint = issue.path.length === 0 ? 'pass an object such as { thresholdRatio: 0.8 }, or nothing for the defaults' : (FIELD_HINTS[field] ?? 'see the configuration reference');
  switch (issue.code) {
    case 'custom':
      return issue.message;
    case 'unrecognized_key': {
      const suggestion = closest(field, knownKeysAt(issue.path.slice(0, -1))) ?? nestedHome(issue.path);
      return `is not a known option: remove it${suggestion ? ` (did you mean ${JSON.stringify(suggestion)}?)` : ''}`;
    }
    case 'invalid_type':
      return `must be ${typeName(issue.expected)}: ${hint}`;
    case 'too_small':
      if (issue.origin === 'string') return `must not be empty: ${hint}`;
      if (issue.origin === 'array') return `must have at least ${String(issue.minimum)} items: ${hint}`;
      return `must be ${issue.inclusive ? 'at least' : 'greater than'} ${String(issue.minimum)}: ${hint}`;
    case 'too_big':
      return `must be ${issue.inclusive ? 'at most' : 'lower than'} ${String(issue.maximum)}: ${hint}`;
    case 'invalid_value':
      return `must be one of ${(issue.values ?? []).map((v) => JSON.stringify(v)).join(', ')}: pick one of them`;
    default:
      return `is invalid (${issue.message}): ${hint}`;
  }
}

function typeName(expected: unknown): string {
  switch (expected) {
    case 'int':
      return 'a whole number';
    case 'number':
      return 'a number';
    case 'string':
      return 'a string';
    case 'boolean':
      return 'true or false';
    case 'array':
      return 'an array';
    case 'object':
    case 'record':
      return 'an object';
    default:
      return `of type ${String(expected)}`;
  }
}

/** The name a hint is keyed by: the last string segment (array indices name their array). */
function fieldName(path: PropertyKey[]): string {
  for (let i = path.length - 1; i >= 0; i--) {
    const segment = path[i];
    if (typeof segment === 'string' && !(path[i - 1] === 'models')) return segment;
  }
  return 'models';
}

function formatPath(path: PropertyKey[]): string {
  let out = 'config';
  path.forEach((segment, i) => {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (path[i - 1] === 'models' && i === 1) out += `[${JSON.stringify(String(segment))}]`;
    else if (typeof segment === 'string' && /^[A-Za-z_$][\w$]*$/.test(segment)) out += `.${segment}`;
    else out += `[${JSON.stringify(String(segment))}]`;
  });
  return out;
}

function valueAt(root: unknown, path: PropertyKey[]): unknown {
  let current = root;
  for (const segment of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<PropertyKey, unknown>)[segment];
  }
  return current;
}

function formatValue(value: unknown): string {
  if (value === undefined) return '(not set)';
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function' || typeof value === 'symbol') return `(${typeof value})`;
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/** A top-level key that belongs in a nested object, e.g. neverPrune → prune.neverPrune. */
function nestedHome(path: PropertyKey[]): string | undefined {
  const [key] = path;
  if (path.length !== 1 || typeof key !== 'string') return undefined;
  if (Object.hasOwn(PruneSchema.shape, key)) return `prune.${key}`;
  if (Object.hasOwn(CircuitBreakerSchema.shape, key)) return `circuitBreaker.${key}`;
  if (Object.hasOwn(ModelEntrySchema.shape, key)) return `models["provider/model"].${key}`;
  return undefined;
}

/** The known key nearest to a misspelt one (case-insensitive; about one edit per 3 letters). */
function closest(key: string, known: string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(1, Math.floor(key.length / 3)) + 1;
  for (const candidate of known) {
    const distance = editDistance(key.toLowerCase(), candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
    }
    previous = current;
  }
  return previous[b.length]!;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
