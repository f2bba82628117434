/**
 * What `xcompact eval` found for one transcript, and the table rows it is shown as: shared by
 * the terminal tables and JSON (eval.ts) and the HTML report (eval-report.ts).
 */
import type { PRICES, WindowEval } from '../eval';
import type { Fidelity, ReplayCalibration } from '../eval/calibration';
import type { MemoryFigures } from '../eval/memory';
import type { SummaryComparison } from '../eval/harness-summaries';
import type { AsRecorded } from '../eval/recorded';

/** A compaction call the harness recorded beside the session (Claude Code's `agent-acompact-*.jsonl`): what its summary request cost. */
export interface CompactionCall {
  file: string;
  promptTokens: number;
  cachedTokens: number;
  outputTokens: number;
  cost: number;
}

/** What the replay sends beyond the transcript's messages. */
export interface SentOverhead {
  /** The transcript recorded its system prompt (it is replayed). */
  recordedSystemPrompt: boolean;
  /** Tokens every replayed request carries for what the harness sent unrecorded (system prompt, tools); 0 when none. */
  unrecordedTokens: number;
  /** Where that figure comes from: fitted to the recorded usage, given with --unrecorded, or no usage to fit. */
  unrecordedFrom: 'fitted' | 'option' | 'no usage';
}

export interface EvaluatedTranscript {
  file: string;
  format: string;
  requests: number;
  windows: WindowEval[];
  /** What the replay sent beyond the messages. */
  overhead?: SentOverhead;
  /** The count the replay used, fitted to the recorded usage (calibration.ts). */
  calibration?: ReplayCalibration;
  /** How closely the fitted count follows the recorded usage, request by request; undefined without usage. */
  fidelity?: Fidelity;
  /** Per window (same order), the harness's own run from its recorded usage alone. */
  recorded?: AsRecorded[];
  /** The memory measures of what the harness itself sent (its own summaries included). */
  recordedMemory?: MemoryFigures;
  /** The harness's own summaries beside xcompact's of the same span (harness-summaries.ts). */
  harnessSummaries?: SummaryComparison[];
  /** The harness's compaction calls found beside the session (their cost is in the as-recorded row). */
  compactionCalls?: CompactionCall[];
}

export type Prices = Readonly<typeof PRICES>;

/** One row of the table: a policy at a window. */
export interface EvalRow {
  policy: string;
  cost: number;
  cacheMissTokens: number;
  compactions: number;
  prunes: number;
  peakShare: number;
  overWindow: number;
  neededRecall: number;
  recallAfterCompaction: number | undefined;
  intentRecall: number;
}

export function rowsOf(w: WindowEval): EvalRow[] {
  return w.runs.map((r) => ({
    policy: r.policy,
    cost: r.ledger.cost,
    cacheMissTokens: r.ledger.cacheMissTokens,
    compactions: r.compactions,
    prunes: r.prunes,
    peakShare: r.ledger.peak / w.window,
    overWindow: r.ledger.overWindow,
    neededRecall: r.memory.neededRecall,
    recallAfterCompaction: r.memory.recallAfterCompaction,
    intentRecall: r.memory.intentRecall,
  }));
}

/**
 * The answer to "which policy at this window": the cheapest of those that sent no request
 * over the window and kept needed recall within 2 points of the best of them, in one line.
 */
export function verdictOf(w: WindowEval): { policy: string | undefined; line: string } {
  const rows = rowsOf(w);
  const valid = rows.filter((r) => r.overWindow === 0);
  if (valid.length === 0) return { policy: undefined, line: 'verdict: no policy kept every request under the window (all are invalid here)' };
  const best = Math.max(...valid.map((r) => r.neededRecall));
  const close = valid.filter((r) => r.neededRecall >= best - 0.02);
  const pick = close.reduce((a, r) => (r.cost < a.cost ? r : a));
  const invalid = rows.length - valid.length;
  return {
    policy: pick.policy,
    line:
      `verdict: ${pick.policy} — the cheapest ($${pick.cost.toFixed(2)}) of the ${close.length} polic${close.length === 1 ? 'y' : 'ies'} under the window with needed recall within 2 points of the best (${(100 * best).toFixed(1)}%)` +
      (invalid > 0 ? `; ${invalid} polic${invalid === 1 ? 'y' : 'ies'} sent requests over the window (invalid)` : ''),
  };
}
