/**
 * Budget resolution for a routed model (docs/spec.md#3-configuration): window, reservation, headroom, threshold,
 * retained tail and summary cap, or a BudgetError that names the route and the fix.
 */
import { XcompactError } from '../../errors';
import { modelKey } from '../metering';
import { resolveModel, type ModelInfo } from './models';
import {
  DEFAULT_RETAIN_FLOOR_RATIO,
  DEFAULT_RETAIN_RATIO,
  DEFAULT_USER_WORDS_TOKENS,
  PRUNE_MARKER_RESERVE,
  PRUNE_MARKER_RESERVE_WITH_RECALL,
  defaultHeadroom,
  defaultOutputReservation,
  pruneSizes,
  type EffectivePolicy,
} from './schema';
import { policyFor } from './policy';
import type { CompactionConfig } from './policy';

// ---------------------------------------------------------------------------------------------
// Budget resolution (docs/spec.md#3-configuration)
// ---------------------------------------------------------------------------------------------

export type BudgetErrorCode =
  | 'no-context-capacity'
  | 'no-message-budget'
  | 'no-pressure-budget'
  | 'retain-not-below-threshold'
  | 'prepare-out-of-range'
  | 'user-words-not-below-threshold'
  /** engine.beforeRequest(): the request, compacted as far as it goes, still leaves no room for its output cap in the window. */
  | 'request-over-window';

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
  /**
   * The most a request's prompt may take when it is sent: M when an output cap is known, else
   * W less the reply's default room, min(W/8, 8192) (defaultOutputReservation): a request with
   * no cap is still sent with room for its reply, never at the window's edge.
   */
  sendBudget: number;
  /** P = M − B */
  pressureBudget: number;
  /** floor(min(W × thresholdRatio, P)); pressure qualifies at >= threshold. */
  threshold: number;
  /** Recent tokens kept verbatim: retainTokens ?? floor(M × retainRatio); below threshold. */
  retain: number;
  /**
   * Where a background summary starts (docs/spec.md#13-background-compaction): floor(W × prepareRatio), default
   * threshold − floor((threshold − retain) / 4); retain < prepare ≤ threshold. Undefined when
   * background compaction is off for the route.
   */
  prepare: number | undefined;
  /**
   * With background compaction: where a step waits for a summary still being written (docs/spec.md#13-background-compaction),
   * halfway from the threshold to the message budget: threshold + floor((M − threshold) / 2). Below
   * it the request still fits with the other half to spare for the count, so the agent goes on.
   * Undefined when background compaction is off for the route.
   */
  wait: number | undefined;
  /** The tail of a compaction the cost model starts early: min(retain, retainFloorTokens ?? floor(M × 0.02)). */
  retainFloor: number;
  /** Summary output cap. */
  maxTokens: number;
  /**
   * Tokens the user's own messages may take in a checkpoint beyond `maxTokens` (the ledger's
   * `<user-messages>`): userWordsTokens ?? min(20,000, floor((threshold − retain) / 3) − maxTokens),
   * at least 0. By default a checkpoint (summary cap and user's words) takes at most a third of
   * what lies between the retained tail and the threshold, so a compaction at the threshold frees
   * at least about half of it in any window (docs/reliability.md: in a 4k window the user's words verbatim
   * took a third of it). 0: the user's messages share the cap.
   */
  userWords: number;
  /** The pruner's sizes for this window (config `prune`, else scaled to the window: pruneSizes). */
  prune: { thresholdChars: number; headChars: number; tailChars: number };
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

/** A default checkpoint (summary cap + the user's words) takes at most 1/3 of threshold − retain. */
export const CHECKPOINT_SHARE_DIVISOR = 3;

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
  const outputSource =
    requestMaxTokens !== undefined ? "the request's max_tokens" : modelMaxOutputTokens !== undefined ? "the model's maxOutputTokens" : 'none';
  const O = requestMaxTokens ?? modelMaxOutputTokens ?? 0;
  const M = W - O;
  if (!(M > 0)) {
    const fix =
      requestMaxTokens !== undefined
        ? `lower the request's max_tokens below ${W}`
        : `lower models[${JSON.stringify(route)}].maxOutputTokens below ${W}, or set max_tokens on the request`;
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
  let prepare: number | undefined;
  if (policy.background) {
    prepare = policy.prepareRatio !== undefined ? floorProduct(W, policy.prepareRatio) : threshold - Math.floor((threshold - retain) / 4);
    if (!(retain < prepare && prepare <= threshold)) {
      fail(
        'prepare-out-of-range',
        `prepare point ${prepare} (floor(${W} × prepareRatio ${policy.prepareRatio})) must be above the retained tail ${retain} and at most the threshold ${threshold}: change prepareRatio, or leave it unset for the default`,
      );
    }
  }
  const maxTokens = policy.maxTokens ?? B;
  const userWords =
    policy.userWordsTokens ?? Math.max(0, Math.min(DEFAULT_USER_WORDS_TOKENS, Math.floor((threshold - retain) / CHECKPOINT_SHARE_DIVISOR) - maxTokens));
  if (policy.userWordsTokens !== undefined && userWords > 0 && !(retain + maxTokens + userWords < threshold)) {
    fail(
      'user-words-not-below-threshold',
      `retained tail ${retain} + summary cap ${maxTokens} + userWordsTokens ${userWords} = ${retain + maxTokens + userWords} must be below the threshold ${threshold}, or no compaction could bring the request under it: lower userWordsTokens (or leave it unset for the default)`,
    );
  }
  return {
    window: W,
    outputReservation: O,
    headroomTokens: B,
    messageBudget: M,
    sendBudget: (requestMaxTokens ?? modelMaxOutputTokens) !== undefined ? M : W - defaultOutputReservation(W),
    pressureBudget: P,
    threshold,
    retain,
    prepare,
    wait: prepare === undefined ? undefined : threshold + Math.floor((M - threshold) / 2),
    retainFloor: Math.min(retain, config.retainFloorTokens ?? floorProduct(M, DEFAULT_RETAIN_FLOOR_RATIO)),
    maxTokens,
    userWords,
    prune: pruneSizes(config.prune, W, policy.recall ? PRUNE_MARKER_RESERVE_WITH_RECALL : PRUNE_MARKER_RESERVE),
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

/**
 * The refusal of a model whose window is unknown (it would never be compacted), raised before a
 * request is recorded or sent; undefined when the window is known. `where` names the option the
 * fix goes in (`withCompaction`, `createAiSdkCompaction`).
 */
export function missingCapacity(
  provider: string,
  model: string,
  userModels: Record<string, Partial<ModelInfo>> | undefined,
  where: string,
): BudgetError | undefined {
  const key = modelKey(provider, model);
  if (resolveModel(key, userModels)) return undefined;
  return new BudgetError(
    'no-context-capacity',
    provider,
    model,
    `${key}: no context window known for this model, so it would never be compacted: pass models: { ${JSON.stringify(key)}: { contextWindow: <tokens> } } to ${where} ` +
      '(or requireCapacity: false to run with overflow recovery only). Nothing was recorded or sent',
  );
}
