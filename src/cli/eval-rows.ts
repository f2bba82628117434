/**
 * What `xcompact eval` found for one transcript, and the table rows it is shown as: shared by
 * the terminal tables and JSON (eval.ts) and the HTML report (eval-report.ts).
 */
import type { PRICES, WindowEval } from '../eval';
import type { AsRecorded } from '../eval/recorded';

/** What the replay sends beyond the transcript's messages. */
export interface SentOverhead {
  /** The transcript recorded its system prompt (it is replayed). */
  recordedSystemPrompt: boolean;
  /** Tokens of the stand-in for what the harness sent unrecorded (system prompt, tools), from its usage; 0 when none. */
  standInTokens: number;
}

export interface EvaluatedTranscript {
  file: string;
  format: string;
  requests: number;
  windows: WindowEval[];
  /** What the replay sent beyond the messages (a harness transcript). */
  overhead?: SentOverhead;
  /** Per window (same order), the harness's own run from its recorded usage alone. */
  recorded?: AsRecorded[];
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
