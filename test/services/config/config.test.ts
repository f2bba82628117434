import { describe, expect, it } from 'vitest';
import {
  BudgetError,
  ConfigError,
  ConfigSchema,
  defaultHeadroom,
  PRUNE_MARKER_RESERVE,
  parseConfig,
  policyFor,
  resolveBudget,
  tokenizerNameFor,
  type BudgetArgs,
  type CompactionConfig,
  type CompactionConfigInput,
} from '../../../src/services/config';
import { BUILTIN_MODELS, resolveModel, resolvePrices } from '../../../src/services/config';
import { NEUTRAL_PRICES } from '../../../src/services/economics';

/** The ConfigError parseConfig throws for `input` (fails the test if it does not throw). */
function configError(input: unknown): ConfigError {
  try {
    parseConfig(input);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(input)} to be rejected`);
}

/** The single message for an input with exactly one problem. */
function onlyMessage(input: unknown): string {
  const { issues } = configError(input);
  expect(issues.map((i) => i.message)).toHaveLength(1);
  return issues[0]!.message;
}

describe('defaults (docs/spec.md#3-configuration)', () => {
  // headroomTokens and maxTokens stay unset: both resolve per model (defaultHeadroom(W)).
  const expected: CompactionConfig = {
    thresholdRatio: 0.8,
    headroomTokens: undefined,
    retainRatio: 0.16,
    maxTokens: undefined,
    userWordsTokens: undefined,
    compactionRetries: 1,
    maxOverflowRetries: 1,
    auto: true,
    background: true,
    backgroundCommit: undefined,
    prepareRatio: undefined,
    recall: false,
    summaryIdleTimeoutMs: 60_000,
    summaryTimeoutMs: 600_000,
    summarizationProvider: '',
    summarizationModel: '',
    modelPolicies: [],
    circuitBreaker: { failureLimit: 3, cooldownMs: 300_000 },
    truncationFallback: true,
    minProgressRatio: 0.1,
    // The pruner's sizes are scaled to each route's window (pruneSizes, resolved in the budget).
    prune: { enabled: true, neverPrune: [] },
    redaction: { enabled: true, patterns: [] },
    economics: true,
    forgetting: 1,
    models: {},
  };

  it('fills every default for an empty or absent configuration', () => {
    expect(parseConfig({})).toEqual(expected);
    expect(parseConfig(undefined)).toEqual(expected);
  });

  it('applies the default retainRatio only when neither retention form is given', () => {
    expect(parseConfig({ retainTokens: 1000 })).toMatchObject({ retainTokens: 1000 });
    expect(parseConfig({ retainTokens: 1000 }).retainRatio).toBeUndefined();
    expect(parseConfig({ retainRatio: 0.3 }).retainRatio).toBe(0.3);
  });

  it('defaults maxTokens to the resolved headroom', () => {
    const route = { provider: 'p', model: 'm', contextWindow: 1_000_000 };
    expect(resolveBudget({ ...route, config: parseConfig({ headroomTokens: 10_000 }) }).maxTokens).toBe(10_000);
    expect(resolveBudget({ ...route, config: parseConfig({ headroomTokens: 10_000, maxTokens: 2048 }) }).maxTokens).toBe(2048);
    expect(resolveBudget({ ...route, config: parseConfig({}) }).maxTokens).toBe(65_536);
    expect(resolveBudget({ ...route, contextWindow: 32_768, config: parseConfig({}) }).maxTokens).toBe(4096);
  });

  it('an unset headroom is 65 536 tokens, but at most an eighth of the window', () => {
    expect(defaultHeadroom(1_000_000)).toBe(65_536);
    expect(defaultHeadroom(524_288)).toBe(65_536);
    expect(defaultHeadroom(524_287)).toBe(65_535);
    expect(defaultHeadroom(131_072)).toBe(16_384);
    expect(defaultHeadroom(8192)).toBe(1024);
    // A 32k local model gets automatic compaction out of the box: threshold min(26214, 32768 − 4096).
    const b = resolveBudget({ config: parseConfig({}), provider: 'local', model: 'm', contextWindow: 32_768 });
    expect(b).toMatchObject({ headroomTokens: 4096, pressureBudget: 28_672, threshold: 26_214 });
  });

  it('fills nested defaults when a nested object is partly given', () => {
    expect(parseConfig({ prune: { enabled: false } }).prune).toEqual({ ...expected.prune, enabled: false });
    expect(parseConfig({ circuitBreaker: { failureLimit: 5 } }).circuitBreaker).toEqual({ failureLimit: 5, cooldownMs: 300_000 });
  });

  it('infers the input type from the schema', () => {
    const input = { thresholdRatio: 0.7, prune: { headChars: 100 } } satisfies CompactionConfigInput;
    expect(ConfigSchema.parse(input).thresholdRatio).toBe(0.7);
  });
});

describe('field rules: one accepted and one rejected value each', () => {
  // [label, accepted config, rejected config, the start of the rejection message]
  const cases: [string, object, object, string][] = [
    [
      'thresholdRatio upper bound',
      { thresholdRatio: 1 },
      { thresholdRatio: 1.01 },
      'config.thresholdRatio = 1.01 must be at most 1: use a number greater than 0 and at most 1',
    ],
    ['thresholdRatio lower bound', { thresholdRatio: 0.2 }, { thresholdRatio: 0 }, 'config.thresholdRatio = 0 must be greater than 0:'],
    ['thresholdRatio type', { thresholdRatio: 0.5 }, { thresholdRatio: '0.8' }, 'config.thresholdRatio = "0.8" must be a number:'],
    ['thresholdRatio NaN', { thresholdRatio: 0.5 }, { thresholdRatio: Number.NaN }, 'config.thresholdRatio = NaN must be a number:'],
    [
      'headroomTokens ≥ 0',
      { headroomTokens: 0, maxTokens: 1 },
      { headroomTokens: -1 },
      'config.headroomTokens = -1 must be at least 0: use a whole number of tokens ≥ 0 (default 65536)',
    ],
    ['headroomTokens integer', { headroomTokens: 100 }, { headroomTokens: 1.5 }, 'config.headroomTokens = 1.5 must be a whole number:'],
    ['retainRatio in (0, 1]', { retainRatio: 0.01 }, { retainRatio: 0 }, 'config.retainRatio = 0 must be greater than 0:'],
    ['retainTokens ≥ 0', { retainTokens: 0 }, { retainTokens: -5 }, 'config.retainTokens = -5 must be at least 0:'],
    [
      'maxTokens positive',
      { maxTokens: 1 },
      { maxTokens: 0 },
      'config.maxTokens = 0 must be at least 1: use a whole number of tokens ≥ 1 (default: headroomTokens)',
    ],
    ['compactionRetries ≥ 0', { compactionRetries: 0 }, { compactionRetries: -1 }, 'config.compactionRetries = -1 must be at least 0:'],
    ['maxOverflowRetries integer', { maxOverflowRetries: 0 }, { maxOverflowRetries: 0.5 }, 'config.maxOverflowRetries = 0.5 must be a whole number:'],
    ['auto boolean', { auto: false }, { auto: 'no' }, 'config.auto = "no" must be true or false:'],
    [
      'summarizationProvider string',
      { summarizationProvider: 'openai', summarizationModel: 'gpt-4o-mini' },
      { summarizationProvider: 1, summarizationModel: 'x' },
      'config.summarizationProvider = 1 must be a string:',
    ],
    ['modelPolicies array', { modelPolicies: [] }, { modelPolicies: {} }, 'config.modelPolicies = {} must be an array:'],
    [
      'modelPolicies provider',
      { modelPolicies: [{ provider: 'a', model: 'b' }] },
      { modelPolicies: [{ provider: '', model: 'b' }] },
      'config.modelPolicies[0].provider = "" must not be empty:',
    ],
    [
      'modelPolicies field',
      { modelPolicies: [{ provider: 'a', model: 'b', thresholdRatio: 0.5 }] },
      { modelPolicies: [{ provider: 'a', model: 'b', thresholdRatio: 2 }] },
      'config.modelPolicies[0].thresholdRatio = 2 must be at most 1:',
    ],
    [
      'circuitBreaker.failureLimit ≥ 1',
      { circuitBreaker: { failureLimit: 1 } },
      { circuitBreaker: { failureLimit: 0 } },
      'config.circuitBreaker.failureLimit = 0 must be at least 1:',
    ],
    [
      'circuitBreaker.cooldownMs ≥ 0',
      { circuitBreaker: { cooldownMs: 0 } },
      { circuitBreaker: { cooldownMs: -1 } },
      'config.circuitBreaker.cooldownMs = -1 must be at least 0:',
    ],
    ['minProgressRatio in [0, 1)', { minProgressRatio: 0 }, { minProgressRatio: 1 }, 'config.minProgressRatio = 1 must be lower than 1:'],
    ['prune.enabled boolean', { prune: { enabled: false } }, { prune: { enabled: 1 } }, 'config.prune.enabled = 1 must be true or false:'],
    [
      'prune.thresholdChars positive',
      { prune: { thresholdChars: 9000 } },
      { prune: { thresholdChars: 0 } },
      'config.prune.thresholdChars = 0 must be at least 1:',
    ],
    ['prune.headChars ≥ 0', { prune: { headChars: 0 } }, { prune: { headChars: -1 } }, 'config.prune.headChars = -1 must be at least 0:'],
    ['prune.tailChars integer', { prune: { tailChars: 0 } }, { prune: { tailChars: 2.5 } }, 'config.prune.tailChars = 2.5 must be a whole number:'],
    [
      'prune.protectRecentTokens ≥ 0',
      { prune: { protectRecentTokens: 0 } },
      { prune: { protectRecentTokens: -1 } },
      'config.prune.protectRecentTokens = -1 must be at least 0:',
    ],
    [
      'prune.minReclaimTokens ≥ 0',
      { prune: { minReclaimTokens: 0 } },
      { prune: { minReclaimTokens: -1 } },
      'config.prune.minReclaimTokens = -1 must be at least 0:',
    ],
    [
      'prune.neverPrune names',
      { prune: { neverPrune: ['read'] } },
      { prune: { neverPrune: ['read', 7] } },
      'config.prune.neverPrune[1] = 7 must be a string: use an array of tool names',
    ],
    [
      'tokenizer enum',
      { tokenizer: 'utf8-bytes' },
      { tokenizer: 'gpt2' },
      'config.tokenizer = "gpt2" must be one of "o200k_base", "cl100k_base", "deepseek-v3", "heuristic", "utf8-bytes", "server": pick one of them',
    ],
    [
      'models contextWindow',
      { models: { 'acme/big': { contextWindow: 1000 } } },
      { models: { 'acme/big': { contextWindow: 0 } } },
      'config.models["acme/big"].contextWindow = 0 must be at least 1:',
    ],
    [
      'models maxOutputTokens',
      { models: { 'openai/gpt-4o': { maxOutputTokens: 1 } } },
      { models: { 'openai/gpt-4o': { maxOutputTokens: 1.5 } } },
      'config.models["openai/gpt-4o"].maxOutputTokens = 1.5 must be a whole number:',
    ],
    [
      'models tokenizer',
      { models: { 'deepseek/deepseek-chat': { tokenizer: 'deepseek-v3' } } },
      { models: { 'deepseek/deepseek-chat': { tokenizer: 'deepseek' } } },
      'config.models["deepseek/deepseek-chat"].tokenizer = "deepseek" must be one of',
    ],
    ['whole configuration', {}, null as unknown as object, 'config = null must be an object: pass an object'],
  ];

  for (const [label, accepted, rejected, message] of cases) {
    it(label, () => {
      expect(() => parseConfig(accepted)).not.toThrow();
      expect(onlyMessage(rejected)).toContain(message);
    });
  }
});

describe('unknown keys', () => {
  it('rejects an unknown key and suggests the nearest known one', () => {
    expect(onlyMessage({ retainRatoi: 0.2 })).toBe('config.retainRatoi = 0.2 is not a known option: remove it (did you mean "retainRatio"?)');
    expect(onlyMessage({ modelPolicies: [{ provider: 'a', model: 'b', tresholdRatio: 0.5 }] })).toBe(
      'config.modelPolicies[0].tresholdRatio = 0.5 is not a known option: remove it (did you mean "thresholdRatio"?)',
    );
  });

  it('points a nested option given at the top level to its home', () => {
    expect(onlyMessage({ neverPrune: ['read'] })).toBe('config.neverPrune = ["read"] is not a known option: remove it (did you mean "prune.neverPrune"?)');
  });

  it('offers no suggestion for a key unlike any option', () => {
    expect(onlyMessage({ colour: 'red' })).toBe('config.colour = "red" is not a known option: remove it');
  });

  it('rejects unknown keys in nested objects', () => {
    expect(onlyMessage({ prune: { head: 1 } })).toMatch(/^config\.prune\.head = 1 is not a known option/);
    expect(onlyMessage({ circuitBreaker: { limit: 1 } })).toMatch(/^config\.circuitBreaker\.limit = 1 is not a known option/);
    expect(onlyMessage({ models: { 'a/b': { contextWindow: 10, window: 10 } } })).toMatch(/^config\.models\["a\/b"\]\.window = 10 is not a known option/);
  });
});

describe('rules across fields', () => {
  it('retainRatio must be lower than thresholdRatio', () => {
    expect(parseConfig({ retainRatio: 0.79 }).retainRatio).toBe(0.79);
    expect(onlyMessage({ retainRatio: 0.9 })).toBe(
      'config.retainRatio = 0.9 must be lower than thresholdRatio (0.8): lower retainRatio or raise thresholdRatio',
    );
    expect(onlyMessage({ retainRatio: 0.5, thresholdRatio: 0.5 })).toMatch(/^config\.retainRatio = 0\.5 must be lower than thresholdRatio \(0\.5\)/);
  });

  it('a thresholdRatio at or below the default retainRatio is rejected, naming the default', () => {
    expect(() => parseConfig({ thresholdRatio: 0.17 })).not.toThrow();
    expect(onlyMessage({ thresholdRatio: 0.16 })).toBe(
      'config.thresholdRatio = 0.16 must be greater than retainRatio (0.16, the default): raise thresholdRatio, or set a lower retainRatio or a retainTokens',
    );
    expect(() => parseConfig({ thresholdRatio: 0.1, retainTokens: 100 })).not.toThrow();
  });

  it('retainRatio and retainTokens are exclusive', () => {
    expect(onlyMessage({ retainRatio: 0.1, retainTokens: 100 })).toBe(
      'config.retainTokens = 100 cannot be combined with retainRatio (0.1) in the same configuration: keep only one of retainRatio and retainTokens',
    );
  });

  it('summarizationProvider and summarizationModel are set together', () => {
    expect(parseConfig({ summarizationProvider: 'openai', summarizationModel: 'gpt-4o-mini' })).toMatchObject({
      summarizationProvider: 'openai',
      summarizationModel: 'gpt-4o-mini',
    });
    expect(onlyMessage({ summarizationProvider: 'openai' })).toBe(
      'config.summarizationModel = (not set) must be set together with summarizationProvider ("openai"): set both or neither',
    );
    expect(onlyMessage({ summarizationProvider: '', summarizationModel: 'm' })).toBe(
      'config.summarizationProvider = "" must be set together with summarizationModel ("m"): set both or neither',
    );
    expect(onlyMessage({ summarizationProvider: '  ', summarizationModel: 'm' })).toMatch(/^config\.summarizationProvider = " {2}" must not be blank/);
  });

  it('zero headroom requires an explicit positive maxTokens', () => {
    expect(parseConfig({ headroomTokens: 0, maxTokens: 4096 })).toMatchObject({ headroomTokens: 0, maxTokens: 4096 });
    expect(onlyMessage({ headroomTokens: 0 })).toBe(
      'config.maxTokens = (not set) must be a positive integer when headroomTokens is 0 (maxTokens, the summary output cap, defaults to headroomTokens): set maxTokens, e.g. 8192, or raise headroomTokens',
    );
  });

  it('head + marker + tail must fit thresholdChars', () => {
    // A threshold given alone: half of it for the head, an eighth for the tail — always fits.
    expect(parseConfig({ prune: { thresholdChars: 1000 } }).prune.thresholdChars).toBe(1000);
    const fitting = 4096 + PRUNE_MARKER_RESERVE + 1024;
    expect(parseConfig({ prune: { thresholdChars: fitting, headChars: 4096, tailChars: 1024 } }).prune.thresholdChars).toBe(fitting);
    expect(onlyMessage({ prune: { thresholdChars: fitting - 1, headChars: 4096, tailChars: 1024 } })).toBe(
      `config.prune = {"thresholdChars":${fitting - 1},"headChars":4096,"tailChars":1024} does not fit a pruned result in thresholdChars: headChars + marker + tailChars = 4096 + ${PRUNE_MARKER_RESERVE} + 1024 = ${fitting} > thresholdChars ${fitting - 1}: lower headChars or tailChars, or raise thresholdChars to at least ${fitting}`,
    );
    expect(onlyMessage({ prune: { thresholdChars: 2000, headChars: 1800 } })).toMatch(/^config\.prune = .* = 2114 > thresholdChars 2000/);
    // No threshold given: the window's default is raised to fit what is given.
    expect(() => parseConfig({ prune: { headChars: 8000 } })).not.toThrow();
  });

  it('the pruner sizes scale with the window: half a character per token, 1,024 to 8,192; a given head and tail raise it', () => {
    const sizes = (window: number, prune = {}) =>
      resolveBudget({ config: parseConfig({ prune }), provider: 'p', model: 'm', contextWindow: window, requestMaxTokens: 256 }).prune;
    expect(sizes(4096)).toEqual({ thresholdChars: 2048, headChars: 1024, tailChars: 256 });
    expect(sizes(1000)).toEqual({ thresholdChars: 1024, headChars: 512, tailChars: 128 });
    expect(sizes(128_000)).toEqual({ thresholdChars: 8192, headChars: 4096, tailChars: 1024 });
    expect(sizes(4096, { headChars: 3000 })).toEqual({ thresholdChars: 3000 + PRUNE_MARKER_RESERVE + 256, headChars: 3000, tailChars: 256 });
    expect(sizes(4096, { thresholdChars: 500 })).toEqual({ thresholdChars: 500, headChars: 250, tailChars: 62 });
  });

  it('model entries: "provider/model" keys, a context window for unknown models, output below the window', () => {
    expect(() =>
      parseConfig({ models: { 'acme/big': { contextWindow: 32_000, maxOutputTokens: 4000 }, 'openai/gpt-4o': { maxOutputTokens: 8000 } } }),
    ).not.toThrow();
    expect(onlyMessage({ models: { 'gpt-4o': { contextWindow: 1000 } } })).toBe(
      'config.models["gpt-4o"] = {"contextWindow":1000} has a key that is not "provider/model": write the key as e.g. "openai/gpt-4o"',
    );
    expect(onlyMessage({ models: { 'acme/big': { tokenizer: 'utf8-bytes' } } })).toBe(
      `config.models["acme/big"].contextWindow = (not set) is required for a model without a built-in entry: set contextWindow to the model's context window in tokens`,
    );
    expect(onlyMessage({ models: { 'openai/gpt-4o': { maxOutputTokens: 128_000 } } })).toBe(
      'config.models["openai/gpt-4o"].maxOutputTokens = 128000 leaves no room for input: maxOutputTokens (128000) must be lower than contextWindow (128000): lower maxOutputTokens or raise contextWindow',
    );
  });
});

describe('model policies', () => {
  it('rejects duplicate provider/model entries', () => {
    const policies = [
      { provider: 'local', model: 'small', thresholdRatio: 0.7 },
      { provider: 'local', model: 'large' },
      { provider: 'local', model: 'small', retainTokens: 10 },
    ];
    expect(() => parseConfig({ modelPolicies: policies.slice(0, 2) })).not.toThrow();
    expect(onlyMessage({ modelPolicies: policies })).toBe(
      'config.modelPolicies[2] = {"provider":"local","model":"small","retainTokens":10} duplicates modelPolicies[0] (local/small): merge the two entries into one',
    );
  });

  it('checks each policy after merging it with the top level', () => {
    // the global retainRatio 0.5 is inherited by the policy, whose threshold is lower
    expect(onlyMessage({ retainRatio: 0.5, modelPolicies: [{ provider: 'p', model: 'm', thresholdRatio: 0.4 }] })).toBe(
      'config.modelPolicies[0].thresholdRatio = 0.4 must be greater than retainRatio (0.5, from config.retainRatio): raise thresholdRatio, or set a lower retainRatio or a retainTokens',
    );
    // a policy retainTokens replaces the inherited ratio, so the same threshold is fine
    expect(() => parseConfig({ retainRatio: 0.5, modelPolicies: [{ provider: 'p', model: 'm', thresholdRatio: 0.4, retainTokens: 100 }] })).not.toThrow();
    expect(onlyMessage({ modelPolicies: [{ provider: 'p', model: 'm', retainRatio: 0.1, retainTokens: 100 }] })).toBe(
      'config.modelPolicies[0].retainTokens = 100 cannot be combined with retainRatio (0.1) in the same policy: keep only one of retainRatio and retainTokens',
    );
  });

  it('zero headroom in a policy needs maxTokens in the policy or globally', () => {
    expect(onlyMessage({ modelPolicies: [{ provider: 'p', model: 'm', headroomTokens: 0 }] })).toMatch(
      /^config\.modelPolicies\[0\]\.maxTokens = \(not set\) must be a positive integer when headroomTokens is 0/,
    );
    expect(() => parseConfig({ maxTokens: 4096, modelPolicies: [{ provider: 'p', model: 'm', headroomTokens: 0 }] })).not.toThrow();
    expect(() => parseConfig({ modelPolicies: [{ provider: 'p', model: 'm', headroomTokens: 0, maxTokens: 4096 }] })).not.toThrow();
  });

  it('resolves each policy completely', () => {
    const config = parseConfig({ retainRatio: 0.2, maxTokens: 8192, modelPolicies: [{ provider: 'p', model: 'm', headroomTokens: 1000, auto: false }] });
    expect(config.modelPolicies).toEqual([
      {
        provider: 'p',
        model: 'm',
        thresholdRatio: 0.8,
        headroomTokens: 1000,
        retainRatio: 0.2,
        maxTokens: 8192,
        compactionRetries: 1,
        maxOverflowRetries: 1,
        auto: false,
        background: true,
        backgroundCommit: undefined,
        summaryIdleTimeoutMs: 60_000,
        summaryTimeoutMs: 600_000,
        recall: false,
      },
    ]);
  });

  it("backgroundCommit: unset by default (resolved by the route's concurrency), 'ready' or 'threshold' at the top level or per model policy, anything else a ConfigError", () => {
    expect(parseConfig({}).backgroundCommit).toBeUndefined();
    const config = parseConfig({ backgroundCommit: 'threshold', modelPolicies: [{ provider: 'p', model: 'm', backgroundCommit: 'ready' }] });
    expect(policyFor(config, 'p', 'm').backgroundCommit).toBe('ready');
    expect(policyFor(config, 'p', 'other').backgroundCommit).toBe('threshold');
    expect(policyFor(parseConfig({ backgroundCommit: 'ready' }), 'p', 'any').backgroundCommit).toBe('ready');
    expect(onlyMessage({ backgroundCommit: 'soon' })).toMatch(/backgroundCommit/);
    expect(() => parseConfig({ backgroundCommit: 'soon' })).toThrow(ConfigError);
  });

  it('recall: off by default, on at the top level or per model policy', () => {
    expect(parseConfig({}).recall).toBe(false);
    const config = parseConfig({ modelPolicies: [{ provider: 'p', model: 'm', recall: true }] });
    expect(policyFor(config, 'p', 'm').recall).toBe(true);
    expect(policyFor(config, 'p', 'other').recall).toBe(false);
    expect(policyFor(parseConfig({ recall: true, modelPolicies: [{ provider: 'p', model: 'm', recall: false }] }), 'p', 'm').recall).toBe(false);
    expect(onlyMessage({ recall: 'yes' })).toMatch(/recall/);
  });

  it('recall on: the prune marker reserve grows by the handle it names', () => {
    // 200 + 64 + 100 fits 400 without recall; with the handle's note the marker may take more.
    const prune = { thresholdChars: 400, headChars: 200, tailChars: 100 };
    expect(() => parseConfig({ prune })).not.toThrow();
    expect(onlyMessage({ prune, recall: true })).toMatch(/headChars \+ marker \(with its recall handle\) \+ tailChars = 200 \+ \d+ \+ 100/);
    expect(onlyMessage({ prune, modelPolicies: [{ provider: 'p', model: 'm', recall: true }] })).toMatch(/with its recall handle/);
  });

  it('maxTokens: explicit per-model cap, else explicit global cap, else the resolved headroom', () => {
    const policy = { provider: 'p', model: 'm', headroomTokens: 1000 };
    expect(policyFor(parseConfig({ modelPolicies: [policy] }), 'p', 'm').maxTokens).toBeUndefined();
    expect(resolveBudget({ config: parseConfig({ modelPolicies: [policy] }), provider: 'p', model: 'm', contextWindow: 100_000 }).maxTokens).toBe(1000);
    expect(policyFor(parseConfig({ maxTokens: 500, modelPolicies: [policy] }), 'p', 'm').maxTokens).toBe(500);
    expect(policyFor(parseConfig({ maxTokens: 500, modelPolicies: [{ ...policy, maxTokens: 700 }] }), 'p', 'm').maxTokens).toBe(700);
  });

  it('policyFor matches provider and model exactly, else returns the top level', () => {
    const config = parseConfig({ modelPolicies: [{ provider: 'p', model: 'm', thresholdRatio: 0.5 }] });
    expect(policyFor(config, 'p', 'm')).toMatchObject({ thresholdRatio: 0.5, overridden: true });
    expect(policyFor(config, 'p', 'M')).toMatchObject({ provider: 'p', model: 'M', thresholdRatio: 0.8, retainRatio: 0.16, overridden: false });
  });
});

describe('error reports', () => {
  const messy = {
    thresholdRatio: 2,
    retainRatio: 0.1,
    retainTokens: 5,
    summarizationModel: 'm',
    color: 1,
    prune: { thresholdChars: 8192, headChars: 9000 },
    modelPolicies: [
      { provider: 'a', model: 'b', headroomTokens: 0 },
      { provider: 'a', model: 'b' },
    ],
    models: { nope: { contextWindow: 5 } },
  };

  it('lists every problem at once, one per line, even when some fields are invalid', () => {
    const error = configError(messy);
    expect(error.code).toBe('config');
    expect(error.issues.map((i) => i.path).sort()).toEqual(
      [
        'config.color',
        'config.models["nope"]',
        'config.modelPolicies[0].maxTokens',
        'config.modelPolicies[1]',
        'config.prune',
        'config.retainTokens',
        'config.summarizationProvider',
        'config.thresholdRatio',
      ].sort(),
    );
    const lines = error.message.split('\n');
    expect(lines[0]).toBe('invalid xcompact configuration (8 problems):');
    expect(lines.slice(1)).toEqual(error.issues.map((i) => `  ${i.message}`));
  });

  it('every message names the field path, the value received and a fix', () => {
    for (const issue of configError(messy).issues) {
      expect(issue.message.startsWith(`${issue.path} = `)).toBe(true);
      expect(issue.message).toMatch(/^config\S* = .+ \S.*: \S/);
    }
  });
});

describe('resolveBudget (docs/spec.md#3-configuration)', () => {
  const config = parseConfig({});
  const budget = (overrides: Partial<BudgetArgs>) => resolveBudget({ config, provider: 'p', model: 'm', contextWindow: 1_000_000, ...overrides });
  const budgetError = (overrides: Partial<BudgetArgs>): BudgetError => {
    try {
      budget(overrides);
    } catch (error) {
      if (error instanceof BudgetError) return error;
      throw error;
    }
    throw new Error('expected a BudgetError');
  };

  it('check vector W = 1 000 000, O = 0 → threshold 800 000, retain 160 000', () => {
    expect(budget({ requestMaxTokens: 0 })).toMatchObject({
      window: 1_000_000,
      outputReservation: 0,
      messageBudget: 1_000_000,
      pressureBudget: 934_464,
      threshold: 800_000,
      retain: 160_000,
    });
  });

  it('check vector W = 1 000 000, O = 256 000 → threshold 678 464, retain 119 040', () => {
    expect(budget({ requestMaxTokens: 256_000 })).toMatchObject({ messageBudget: 744_000, pressureBudget: 678_464, threshold: 678_464, retain: 119_040 });
  });

  it('neighbours: one more output token lowers P-bound threshold and retain by one', () => {
    expect(budget({ requestMaxTokens: 256_001 })).toMatchObject({ threshold: 678_463, retain: 119_039 });
    expect(budget({ requestMaxTokens: 255_999 })).toMatchObject({ threshold: 678_465, retain: 119_040 });
  });

  it('the threshold switches from W × ratio to P where they cross', () => {
    // W × 0.8 = W − O − 65536 at O = 134464
    expect(budget({ requestMaxTokens: 134_464 }).threshold).toBe(800_000);
    expect(budget({ requestMaxTokens: 134_465 }).threshold).toBe(799_999);
    expect(budget({ requestMaxTokens: 134_463 }).threshold).toBe(800_000);
  });

  it('O is the request max_tokens, else the model default, else 0', () => {
    expect(budget({ requestMaxTokens: 1000, modelMaxOutputTokens: 5000 }).outputReservation).toBe(1000);
    expect(budget({ modelMaxOutputTokens: 5000 }).outputReservation).toBe(5000);
    expect(budget({}).outputReservation).toBe(0);
  });

  it('ratios floor as decimals: 100 × 0.29 is 29', () => {
    const exact = parseConfig({ thresholdRatio: 0.29, headroomTokens: 0, maxTokens: 10 });
    expect(resolveBudget({ config: exact, provider: 'p', model: 'm', contextWindow: 100 })).toMatchObject({ threshold: 29, retain: 16 });
  });

  it('no context capacity', () => {
    const error = budgetError({ contextWindow: undefined });
    expect(error.code).toBe('no-context-capacity');
    expect(error.message).toBe(
      'p/m: no context capacity known (contextWindow = undefined): add models: { "p/m": { contextWindow: <tokens> } } to the configuration (overflow recovery works without it)',
    );
    expect(budgetError({ contextWindow: 0 }).code).toBe('no-context-capacity');
  });

  it('no message budget when O ≥ W', () => {
    expect(budget({ contextWindow: 200_000, requestMaxTokens: 100_000, config: parseConfig({ headroomTokens: 0, maxTokens: 1 }) }).messageBudget).toBe(100_000);
    const error = budgetError({ contextWindow: 128_000, requestMaxTokens: 128_000 });
    expect(error).toMatchObject({ code: 'no-message-budget', provider: 'p', model: 'm' });
    expect(error.message).toBe(
      "p/m: no message budget: window 128000 − output reservation 128000 (the request's max_tokens) = 0 tokens: lower the request's max_tokens below 128000",
    );
    expect(budgetError({ contextWindow: 1000, modelMaxOutputTokens: 2000 }).message).toContain(
      'lower models["p/m"].maxOutputTokens below 1000, or set max_tokens on the request',
    );
  });

  it('no pressure budget when M ≤ headroom', () => {
    const headroom = (extra: object = {}) => parseConfig({ headroomTokens: 65_536, ...extra });
    expect(budget({ contextWindow: 65_537, config: headroom({ retainTokens: 0 }) })).toMatchObject({ pressureBudget: 1, threshold: 1 });
    const error = budgetError({ contextWindow: 65_536, config: headroom() });
    expect(error.code).toBe('no-pressure-budget');
    expect(error.message).toBe(
      'p/m: no pressure budget: message budget 65536 (window 65536 − output 0) − headroomTokens 65536 = 0 tokens: set headroomTokens below 65536, e.g. modelPolicies: [{ provider: "p", model: "m", headroomTokens: 16384 }]',
    );
  });

  it('retain must be below the threshold', () => {
    // W = 65 537, headroom 65 536: P = 1 → threshold 1, retain floor(65537 × 0.16) = 10485
    const error = budgetError({ contextWindow: 65_537, config: parseConfig({ headroomTokens: 65_536 }) });
    expect(error.code).toBe('retain-not-below-threshold');
    expect(error.message).toBe(
      'p/m: retained tail 10485 (floor(65537 × retainRatio 0.16)) must be below the threshold 1 (floor(min(65537 × thresholdRatio 0.8, 1))): lower retainTokens/retainRatio, raise thresholdRatio or lower headroomTokens',
    );
    const tokens = (retainTokens: number) => parseConfig({ retainTokens });
    expect(budget({ config: tokens(799_999) }).retain).toBe(799_999);
    expect(budgetError({ config: tokens(800_000) }).message).toContain('retained tail 800000 (retainTokens) must be below the threshold 800000');
  });

  it('zero headroom: P = M', () => {
    const zero = parseConfig({ headroomTokens: 0, maxTokens: 4096 });
    expect(budget({ config: zero, contextWindow: 1000 })).toMatchObject({ pressureBudget: 1000, threshold: 800, retain: 160, maxTokens: 4096 });
  });

  it('a model policy overrides thresholdRatio, retainTokens and headroom for its route only', () => {
    const withPolicy = parseConfig({
      modelPolicies: [{ provider: 'local', model: 'small', thresholdRatio: 0.7, retainTokens: 2048, headroomTokens: 0, maxTokens: 1024 }],
    });
    expect(resolveBudget({ config: withPolicy, provider: 'local', model: 'small', contextWindow: 32_768 })).toMatchObject({
      threshold: 22_937,
      retain: 2048,
      pressureBudget: 32_768,
      maxTokens: 1024,
      policy: { overridden: true },
    });
    expect(() => resolveBudget({ config: { ...withPolicy, headroomTokens: 65_536 }, provider: 'local', model: 'other', contextWindow: 32_768 })).toThrow(
      /no pressure budget/,
    );
    // Without a policy the route gets the window-scaled headroom (32768 / 8), not the policy's 0.
    expect(resolveBudget({ config: withPolicy, provider: 'local', model: 'other', contextWindow: 32_768 })).toMatchObject({
      headroomTokens: 4096,
      policy: { overridden: false },
    });
  });

  it('prune defaults: protectRecentTokens = retain, minReclaimTokens = max(512, 2% of W)', () => {
    expect(budget({})).toMatchObject({ protectRecentTokens: 160_000, minReclaimTokens: 20_000 });
    expect(budget({ contextWindow: 90_000 })).toMatchObject({ protectRecentTokens: 14_400, minReclaimTokens: 1800 });
    const small = parseConfig({ headroomTokens: 0, maxTokens: 100 });
    expect(budget({ config: small, contextWindow: 20_000 }).minReclaimTokens).toBe(512);
    const explicit = parseConfig({ prune: { protectRecentTokens: 5, minReclaimTokens: 7 } });
    expect(budget({ config: explicit })).toMatchObject({ protectRecentTokens: 5, minReclaimTokens: 7 });
  });
});

describe('model registry', () => {
  it('has real figures for the built-in models', () => {
    // No list price for DeepSeek's retired names (models.ts): the neutral table applies.
    expect(resolveModel('deepseek/deepseek-chat')).toEqual({ contextWindow: 131_072, maxOutputTokens: 4096, tokenizer: 'o200k_base' });
    expect(resolvePrices('deepseek/deepseek-chat')).toEqual(NEUTRAL_PRICES);
    expect(resolveModel('openai/gpt-4.1')).toEqual({
      contextWindow: 1_047_576,
      maxOutputTokens: 32_768,
      tokenizer: 'o200k_base',
      prices: { input: 2, cacheRead: 0.5, cacheWrite: 2, output: 8 },
    });
    expect(resolveModel('openai/gpt-3.5-turbo')?.tokenizer).toBe('cl100k_base');
    // An output cap a model's page does not publish is left unset (never guessed); a published one is below the window.
    for (const [key, info] of Object.entries(BUILTIN_MODELS))
      expect([key, info.maxOutputTokens === undefined || info.maxOutputTokens < info.contextWindow]).toEqual([key, true]);
  });

  it('is frozen', () => {
    expect(Object.isFrozen(BUILTIN_MODELS)).toBe(true);
    expect(Object.isFrozen(BUILTIN_MODELS['openai/gpt-4o'])).toBe(true);
  });

  it('user entries override field by field and extend the registry', () => {
    expect(resolveModel('deepseek/deepseek-chat', { 'deepseek/deepseek-chat': { tokenizer: 'deepseek-v3' } })).toEqual({
      contextWindow: 131_072,
      maxOutputTokens: 4096,
      tokenizer: 'deepseek-v3',
    });
    expect(resolveModel('acme/big', { 'acme/big': { contextWindow: 50_000 } })).toEqual({ contextWindow: 50_000, tokenizer: 'o200k_base' });
    expect(resolveModel('acme/big')).toBeUndefined();
    expect(resolveModel('toString')).toBeUndefined();
  });

  it('prices: the neutral table, under the built-in entry, under the user entry field by field', () => {
    expect(resolvePrices('acme/big')).toEqual(NEUTRAL_PRICES);
    expect(resolvePrices('openai/gpt-5')).toEqual({ input: 1.25, cacheRead: 0.125, cacheWrite: 1.25, output: 10 });
    const config = parseConfig({
      models: { 'openai/gpt-5': { prices: { cacheWrite: 1.5 } }, 'acme/big': { contextWindow: 50_000, prices: { input: 3, cacheRead: 0.3 } } },
    });
    expect(resolvePrices('openai/gpt-5', config.models)).toEqual({ input: 1.25, cacheRead: 0.125, cacheWrite: 1.5, output: 10 });
    expect(resolvePrices('acme/big', config.models)).toEqual({ ...NEUTRAL_PRICES, input: 3, cacheRead: 0.3 });
    expect(onlyMessage({ models: { 'acme/big': { contextWindow: 50_000, prices: { output: -1 } } } })).toMatch(/output/);
    expect(onlyMessage({ models: { 'acme/big': { contextWindow: 50_000, prices: { input: 1, tip: 2 } } } })).toMatch(/tip/);
  });

  it('retainFloorTokens bounds the tail of an early compaction, never above the retained tail', () => {
    const budget = (input: object) =>
      resolveBudget({ config: parseConfig(input), provider: 'acme', model: 'big', contextWindow: 100_000, modelMaxOutputTokens: 0 });
    expect(budget({}).retainFloor).toBe(2_000); // floor(100 000 × 0.02)
    expect(budget({ retainFloorTokens: 5_000 }).retainFloor).toBe(5_000);
    expect(budget({ retainFloorTokens: 50_000 }).retainFloor).toBe(budget({}).retain);
    expect(onlyMessage({ retainFloorTokens: -1 })).toMatch(/retainFloorTokens|>=|0/);
  });

  it('config.tokenizer forces one tokenizer for every model', () => {
    const config = parseConfig({ models: { 'deepseek/deepseek-chat': { tokenizer: 'deepseek-v3' } } });
    expect(tokenizerNameFor(config, 'deepseek', 'deepseek-chat')).toBe('deepseek-v3');
    expect(tokenizerNameFor(config, 'openai', 'gpt-4-turbo')).toBe('cl100k_base');
    expect(tokenizerNameFor(config, 'acme', 'unknown')).toBe('o200k_base');
    expect(tokenizerNameFor(parseConfig({ tokenizer: 'utf8-bytes', models: config.models }), 'deepseek', 'deepseek-chat')).toBe('utf8-bytes');
  });
});

describe('background compaction fields (docs/spec.md#13-background-compaction)', () => {
  const budgetOf = (config: unknown) => resolveBudget({ config: parseConfig(config), provider: 'p', model: 'm', contextWindow: 1_000_000 });

  it('puts the default prepare point a quarter of the way from the threshold back to the retained tail', () => {
    const b = budgetOf({ background: true });
    expect(b.threshold).toBe(800_000);
    expect(b.retain).toBe(160_000);
    expect(b.prepare).toBe(800_000 - (800_000 - 160_000) / 4);
    // On by default: the default prepare point; off, none.
    expect(budgetOf({}).prepare).toBe(b.prepare);
    expect(budgetOf({ background: false }).prepare).toBeUndefined();
  });

  it('takes prepareRatio as a share of the window, per model too', () => {
    expect(budgetOf({ background: true, prepareRatio: 0.7 }).prepare).toBe(700_000);
    const config = parseConfig({ background: false, modelPolicies: [{ provider: 'p', model: 'm', background: true, prepareRatio: 0.5 }] });
    expect(resolveBudget({ config, provider: 'p', model: 'm', contextWindow: 1_000_000 }).prepare).toBe(500_000);
    expect(resolveBudget({ config, provider: 'p', model: 'other', contextWindow: 1_000_000 }).prepare).toBeUndefined();
  });

  it('rejects a prepare point above the threshold or inside the retained tail', () => {
    expect(onlyMessage({ prepareRatio: 0.9 })).toMatch(/prepareRatio.*must not be above thresholdRatio/);
    expect(onlyMessage({ prepareRatio: 0.1 })).toMatch(/prepareRatio.*must be above retainRatio/);
    expect(onlyMessage({ background: 'yes' })).toMatch(/background/);
    // A retainTokens is only known per route: checked when the budget resolves.
    expect(() => budgetOf({ background: true, prepareRatio: 0.3, retainTokens: 400_000 })).toThrow(expect.objectContaining({ code: 'prepare-out-of-range' }));
  });
});

describe("the user's words' own budget in a checkpoint (userWordsTokens)", () => {
  const budgetOf = (config: unknown, contextWindow = 131_072) =>
    resolveBudget({ config: parseConfig(config), provider: 'p', model: 'm', contextWindow, modelMaxOutputTokens: 4_096 });

  it('defaults to a third of what lies between the retained tail and the threshold, less the summary cap, at most 20,000 (docs/reliability.md)', () => {
    const small = budgetOf({}, 32_768);
    expect(small.userWords).toBe(Math.floor((small.threshold - small.retain) / 3) - small.maxTokens);
    expect(small.userWords).toBeGreaterThan(2_000);
    expect(small.userWords).toBeLessThan(3_000);
    // The whole checkpoint (cap + user's words) stays within a third of threshold − retain, in any window.
    for (const w of [8_192, 32_768, 131_072, 1_000_000]) {
      const b = budgetOf({}, w);
      expect(b.maxTokens + b.userWords).toBeLessThanOrEqual(Math.max(b.maxTokens, Math.floor((b.threshold - b.retain) / 3)));
    }
    expect(budgetOf({}, 131_072).userWords).toBe(Math.floor((104_857 - 20_316) / 3) - 16_384);
    expect(budgetOf({}, 1_000_000).userWords).toBe(20_000);
    // A budget whose threshold leaves nothing above the tail and the cap: none, never negative.
    expect(budgetOf({ retainRatio: 0.7, thresholdRatio: 0.72 }, 32_768).userWords).toBe(0);
  });

  it('takes an explicit value, per model too, and rejects one no compaction could get under the threshold', () => {
    expect(budgetOf({ userWordsTokens: 0 }).userWords).toBe(0);
    expect(budgetOf({ userWordsTokens: 3_000 }).userWords).toBe(3_000);
    const config = parseConfig({ modelPolicies: [{ provider: 'p', model: 'm', userWordsTokens: 1_234 }] });
    expect(resolveBudget({ config, provider: 'p', model: 'm', contextWindow: 131_072 }).userWords).toBe(1_234);
    expect(onlyMessage({ userWordsTokens: -1 })).toMatch(/userWordsTokens/);
    expect(() => budgetOf({ userWordsTokens: 30_000 }, 32_768)).toThrow(expect.objectContaining({ code: 'user-words-not-below-threshold' }));
  });
});
