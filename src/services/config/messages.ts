/**
 * Configuration error messages: "<path> = <value> <problem>: <fix>", with a "did you mean"
 * for misspelt keys.
 */
import { CONFIG_TOKENIZER_NAMES } from '../metering';
import {
  CircuitBreakerSchema,
  DEFAULT_HEADROOM_TOKENS,
  DEFAULT_RETAIN_RATIO,
  DEFAULT_THRESHOLD_RATIO,
  FIELDS,
  ModelEntrySchema,
  ModelPolicySchema,
  PruneSchema,
} from './schema';

export interface ConfigIssue {
  /** e.g. `config.modelPolicies[0].thresholdRatio` */
  path: string;
  /** One line naming the field, the value received and the fix. */
  message: string;
}

/** A zod issue, flattened (unknown keys one by one). */
export interface RawIssue {
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
  tokenizer: `use one of ${CONFIG_TOKENIZER_NAMES.map((n) => JSON.stringify(n)).join(', ')} ("server": the model's own llama.cpp or vLLM server counts)`,
  tokenizerUrl:
    'use the http(s) URL of the model server\'s tokenize endpoint, e.g. "http://127.0.0.1:8080/tokenize" (default: the client\'s base URL without /v1, then /tokenize)',
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

export function describeIssue(issue: RawIssue, raw: unknown): ConfigIssue {
  const path = formatPath(issue.path);
  const value = formatValue(valueAt(raw, issue.path));
  return { path, message: `${path} = ${value} ${problemOf(issue)}` };
}

function problemOf(issue: RawIssue): string {
  const field = fieldName(issue.path);
  const hint =
    issue.path.length === 0
      ? 'pass an object such as { thresholdRatio: 0.8 }, or nothing for the defaults'
      : (FIELD_HINTS[field] ?? 'see the configuration reference');
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

export function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
