/**
 * Scenarios for checkLoop: the simple paths of the loop model (model.ts), generated with
 * @xstate/graph's public API, each compiled into what the local server must do (replies, delays,
 * provider error bodies, cut and stalled streams), what the loop is given (turns, fixture files,
 * the model's window, the engine config) and what the loop must show in the end.
 */
import { getSimplePaths } from '@xstate/graph';
import type { CompactionConfigInput } from '../../services/config';
import { loopModel, LOOP_MODEL_EVENTS, type LoopModelEvent, type OverflowProvider, type SummaryOutcome, type ToolCrashPoint } from './model';

/** What the loop must end with. */
export type ExpectedOutcome =
  /** Every turn answered; the loop resolved. */
  | 'done'
  /** The loop rejected with the provider's own error (the engine answered `fail`, as it must when nothing can be compacted). */
  | 'provider-error'
  /** The loop's signal was aborted mid-summary: the loop rejected, and nothing was left open in the log. */
  | 'cancelled';

export interface LoopExpectations {
  outcome: ExpectedOutcome;
  /** At least one tool result pruned (a `compaction/prune` in the log). */
  pruned?: boolean;
  /** At least one compaction committed, with this trigger, and marked background or not. */
  committed?: { trigger: 'pressure' | 'overflow'; background?: boolean };
  /** At least one compaction ended with an error (the summary failed), and the loop went on. */
  summaryFailed?: boolean;
  /** The engine's circuit breaker opened and later closed again (seen through the engine, when the loop built one). */
  breaker?: boolean;
  /** The process crashed; the loop was run again on the same store and finished the turns. */
  crash?: 'mid-request' | 'mid-summary' | 'mid-tool';
}

/** What the scripted model does with the scenario's turn (the last turn: earlier ones only build history). */
export interface ScenarioScript {
  /** Fixture the model's first tool call names (a file in the loop's workdir); none: it answers at once. */
  toolFixture?: string;
  /** The first tool step's reply calls the tool this many times at once (a parallel batch); default 1. */
  parallelCalls?: number;
  /**
   * After the first tool step, one more tool step reading this fixture: sized so that the
   * conversation uncompacted no longer fits the window, so a loop that does not send what the
   * engine compacted overflows (only where a summary commits first).
   */
  followUpFixture?: string;
  /** More tool steps after the first (small results), each answered after its delay in ms: the breaker scenario needs steps after the cooldown. */
  extraToolSteps?: readonly number[];
  /**
   * The fixture each extra tool step reads, by its index in `extraToolSteps` (absent or
   * undefined: the small `notes-tiny.txt`). The breaker scenario refills the context with these:
   * a truncation checkpoint stands in for each failed summary (config `truncationFallback`), so
   * only a step that brings the pressure back starts the next compaction to fail.
   */
  extraToolFixtures?: readonly (string | undefined)[];
  /** The first agent request of the turn after its tool step (or its very first, without one) is answered with this provider's overflow error. */
  overflow?: OverflowProvider;
  /** How summary requests are answered. */
  summary: SummaryOutcome | 'hang';
  /** Summary replies wait this long (a background summary that lands while the agent works). */
  summaryDelayMs: number;
  /** Agent replies after a tool result wait this long. */
  answerDelayMs: number;
  /**
   * Crash the process when this request arrives (`turn-request`, `summary-request`), or inside
   * the tool step: when the loop runs the first call (`tool-call`: the reply is recorded, no
   * result yet), or the second call of the batch once the first has returned (`tool-batch`).
   */
  crashAt?: 'turn-request' | 'summary-request' | ToolCrashPoint;
  /** Abort the loop's signal when the first summary request arrives. */
  cancelAtSummary?: boolean;
}

export interface LoopScenario {
  /** e.g. `tool → compacts → summary fails → answer → done`. */
  readonly name: string;
  /** The loop model's states along the path. */
  readonly path: readonly string[];
  /** The loop model's events along the path. */
  readonly events: readonly LoopModelEvent[];
  /** The engine chart states the path exercises. */
  readonly charts: readonly string[];
  /** User turns, in order; the last is the scenario's own. */
  readonly turns: readonly string[];
  /** Files the loop's tools may read (name → content), written to the loop's workdir. */
  readonly fixtures: Readonly<Record<string, string>>;
  readonly provider: string;
  readonly model: string;
  readonly contextWindow: number;
  /** The `max_tokens` the loop must send (the engine's output reservation). */
  readonly maxOutputTokens: number;
  /** The engine config the loop must pass (`createCompactionEngine({ config })`). */
  readonly config: CompactionConfigInput;
  readonly script: ScenarioScript;
  readonly expect: LoopExpectations;
}

export interface LoopScenarioOptions {
  /** Only scenarios whose name includes one of these strings. */
  only?: readonly string[];
}

const WINDOW = 8192;
const MAX_OUTPUT = 512;
const HEADROOM = 1024;
// The threshold is floor(min(0.8 W, W − O − B)) = 6553, the retained tail floor((W − O) × 0.16) = 1228,
// the prepare point 6553 − (6553 − 1228) / 4 = 5221 (all in the server's tokens: UTF-8 bytes ÷ 4).
const HISTORY_TOKENS = 3000;
const FIXTURE_TOKENS = { small: 100, prune: 9000, compact: 4400, prepare: 2800, cut: 2600 } as const;
/** The cut scenario's parallel batch: four results of 2,600 tokens, more than the window alone. */
const CUT_BATCH = 4;
// The follow-up step after a commit: history + the compacting result + this is over the window
// (3000 + 4400 + 3000, 3000 + 2800 + 3000 > 8192), the compacted conversation plus it is not.
const FOLLOW_UP_TOKENS = 3000;
// The breaker scenario's refill steps: after a truncation checkpoint (about 4500 in, then about
// 3500), each brings the pressure back over the threshold (6553) and keeps the request under W − O (7680).
const BREAKER_REFILL_TOKENS = { failing: 2700, afterCooldown: 3300 } as const;

/** Text of about `tokens` of the server's tokens (UTF-8 bytes ÷ 4), deterministic. */
export function fillerText(tokens: number, topic: string): string {
  const sentence = `The ${topic} notes say the retry budget of the parser is shared by every worker and must not reset mid-turn. `;
  let text = '';
  while (text.length < tokens * 4) text += sentence;
  return text.slice(0, tokens * 4);
}

function stateName(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

function eventLabel(e: LoopModelEvent): string {
  if (e.type === 'summary.settles') return `summary ${e.outcome}`;
  if (e.type === 'provider.overflows') return `${e.provider} overflow`;
  if (e.type === 'process.crashes' && e.at)
    return e.at === 'tool-call' ? 'process crashes (tool call recorded)' : 'process crashes (parallel batch half answered)';
  return e.type.replace('.', ' ');
}

const CHARTS_OF: Partial<Record<LoopModelEvent['type'], readonly string[]>> = {
  'model.calls-tool': ['engine.idle', 'pressure.measuring'],
  'pressure.below': ['pressure.below'],
  'pressure.prunes': ['pressure.pruning', 'pressure.relieved-by-pruning'],
  'request.cut': ['fit.measuring', 'fit.cutting', 'fit.fits'],
  'pressure.compacts': ['pressure.selecting', 'transaction.summarizing', 'transaction.committing'],
  'pressure.prepares': ['background.preparing', 'background.committing'],
  'summary.settles': ['transaction.revalidating'],
  'loop.cancels': ['transaction.cancelled'],
  'process.crashes': ['session.orphan-bracket'],
  'process.reopens': ['session.recover'],
  'provider.overflows': ['overflow.classifying', 'overflow.recovering'],
  'engine.retries': ['overflow.retry'],
  'engine.gives-up': ['overflow.fail'],
};

/** Compiles one path of the loop model into a scenario. */
function compile(events: readonly LoopModelEvent[], path: readonly string[]): LoopScenario {
  const has = (type: LoopModelEvent['type']) => events.some((e) => e.type === type);
  const summaryEvent = events.find((e): e is Extract<LoopModelEvent, { type: 'summary.settles' }> => e.type === 'summary.settles');
  const overflowEvent = events.find((e): e is Extract<LoopModelEvent, { type: 'provider.overflows' }> => e.type === 'provider.overflows');
  const background = has('pressure.prepares');
  const compacting = has('pressure.compacts') || background;
  const givesUp = has('engine.gives-up');
  const crashEvent = events.find((e): e is Extract<LoopModelEvent, { type: 'process.crashes' }> => e.type === 'process.crashes');
  const toolCrash = crashEvent?.at;

  const fixtures: Record<string, string> = {};
  let toolFixture: string | undefined;
  // An overflow the engine recovers from comes after a tool step, as it does in practice: the retry must keep the step's tool result.
  if (has('engine.retries')) {
    toolFixture = 'notes-small.txt';
    fixtures[toolFixture] = fillerText(FIXTURE_TOKENS.small, 'small');
  }
  if (has('model.calls-tool')) {
    const size = has('pressure.prunes') ? 'prune' : has('request.cut') ? 'cut' : has('pressure.compacts') ? 'compact' : background ? 'prepare' : 'small';
    toolFixture = `notes-${size}.txt`;
    fixtures[toolFixture] = fillerText(FIXTURE_TOKENS[size], size);
  }
  const outcome = summaryEvent?.outcome;
  const breaker = outcome === 'breaker';
  // The breaker needs failureLimit (2) consecutive failed compactions. With the default
  // `truncationFallback`, a truncation checkpoint stands in for each failed summary (the failure
  // still counts) and relieves the pressure, so a refill step brings it back over the threshold
  // for the second failure; a refill after the cool-down makes a summary (now answered) commit.
  if (breaker) {
    fixtures['notes-tiny.txt'] = fillerText(20, 'tiny');
    fixtures['notes-refill.txt'] = fillerText(BREAKER_REFILL_TOKENS.failing, 'refill');
    fixtures['notes-refill-more.txt'] = fillerText(BREAKER_REFILL_TOKENS.afterCooldown, 'refill more');
  }
  // Where a summary commits before the answer (it succeeds, or the crashed run's compaction is done again after the reopen).
  const followUp = compacting && (outcome === 'succeeds' || has('process.crashes')) ? 'notes-more.txt' : undefined;
  if (followUp) fixtures[followUp] = fillerText(FOLLOW_UP_TOKENS, 'more');

  const config: CompactionConfigInput = {
    headroomTokens: HEADROOM,
    background,
    // The hardest interleaving for a loop: the commit lands on its own, between the loop's calls
    // (by default a ready summary is held, and committed inside the afterStep() at the threshold).
    ...(background ? { backgroundCommit: 'ready' as const } : {}),
    // Pruning would relieve the pressure the compaction scenarios need; the prune scenario turns its protections off.
    // The cut scenario protects every result from pruning (they all lie in the retained tail, as in a small window): only the cut can fit them.
    prune: has('pressure.prunes')
      ? { protectRecentTokens: 0, minReclaimTokens: 0 }
      : has('request.cut')
        ? { protectRecentTokens: WINDOW }
        : compacting
          ? { enabled: false }
          : {},
    ...(breaker ? { circuitBreaker: { failureLimit: 2, cooldownMs: 150 } } : {}),
    // A stalled summary stream must end as summary-timeout, not hang the loop.
    ...(outcome === 'stalls' ? { summaryIdleTimeoutMs: 300 } : {}),
  };

  // A turn of history first, so there is something to compact (none where nothing must be compactable).
  const turns = givesUp
    ? [fillerText(Math.round(WINDOW * 0.9), 'pasted log')]
    : [fillerText(HISTORY_TOKENS, 'history'), toolFixture ? `Read ${toolFixture} and fix the bug it describes.` : 'Fix the bug in the parser.'];

  const script: ScenarioScript = {
    ...(toolFixture ? { toolFixture } : {}),
    ...(toolCrash === 'tool-batch' ? { parallelCalls: 2 } : has('request.cut') ? { parallelCalls: CUT_BATCH } : {}),
    ...(followUp ? { followUpFixture: followUp } : {}),
    ...(breaker ? { extraToolSteps: [0, 0, 250, 250] } : {}),
    // In the background mode the failed summaries leave the pressure below the threshold (no truncation stands in): no refill.
    ...(breaker && !background ? { extraToolFixtures: ['notes-refill.txt', undefined, undefined, 'notes-refill-more.txt'] } : {}),
    ...(overflowEvent ? { overflow: overflowEvent.provider } : {}),
    summary: has('loop.cancels') ? 'hang' : (outcome ?? 'succeeds'),
    summaryDelayMs: background ? 30 : 0,
    answerDelayMs: background || breaker ? 400 : 0,
    ...(has('process.crashes') ? { crashAt: toolCrash ?? (compacting ? ('summary-request' as const) : ('turn-request' as const)) } : {}),
    ...(has('loop.cancels') ? { cancelAtSummary: true } : {}),
  };

  const expect: LoopExpectations = {
    outcome: givesUp ? 'provider-error' : has('loop.cancels') ? 'cancelled' : 'done',
    ...(has('pressure.prunes') || has('request.cut') ? { pruned: true } : {}),
    ...(compacting && (outcome === 'succeeds' || outcome === 'breaker') ? { committed: { trigger: 'pressure' as const, background } } : {}),
    // After a crash mid-summary the resumed run compacts again, in whichever mode its pressure calls for.
    ...(compacting && has('process.crashes') ? { committed: { trigger: 'pressure' as const } } : {}),
    ...(has('engine.retries') ? { committed: { trigger: 'overflow' as const } } : {}),
    ...(outcome === 'fails' || outcome === 'truncated' || outcome === 'refused' || outcome === 'stalls' ? { summaryFailed: true } : {}),
    ...(breaker ? { breaker: true } : {}),
    ...(has('process.crashes') ? { crash: toolCrash ? ('mid-tool' as const) : compacting ? ('mid-summary' as const) : ('mid-request' as const) } : {}),
  };

  const charts = [...new Set(events.flatMap((e) => CHARTS_OF[e.type] ?? []))];
  return {
    name: events.map(eventLabel).join(' → '),
    path,
    events,
    charts,
    turns,
    fixtures,
    provider: 'local',
    model: 'scripted-agent',
    contextWindow: WINDOW,
    maxOutputTokens: MAX_OUTPUT,
    config,
    script,
    expect,
  };
}

/**
 * Every scenario: one per simple path of the loop model from the user's turn to an end state,
 * generated by @xstate/graph (`getSimplePaths`). Deterministic: the same list, in the same order,
 * on every call.
 */
export function loopScenarios(options: LoopScenarioOptions = {}): LoopScenario[] {
  const paths = getSimplePaths(loopModel, {
    events: LOOP_MODEL_EVENTS as LoopModelEvent[],
    toState: (state) => state.status === 'done',
  });
  const scenarios = paths
    .filter((p) => p.state.status === 'done')
    .map((p) =>
      compile(
        p.steps.slice(1).map((s) => s.event),
        p.steps.map((s) => stateName(s.state.value)),
      ),
    );
  const unique = [...new Map(scenarios.map((s) => [s.name, s])).values()];
  return options.only ? unique.filter((s) => options.only!.some((o) => s.name.includes(o))) : unique;
}
