/**
 * How a demo run of any length is laid out: its turns, whether a manual `/compact` sits
 * between them, and when the scripted context overflow may be served. Everything is relative
 * to the step count, so a 5-step run is a shorter version of the 96-step one, not a failure.
 */

export interface DemoSchedule {
  /** Steps per turn; they add up to the run's steps. */
  turns: number[];
  /** A manual `/compact` between the first and the second turn (only when there are two). */
  compactBetweenTurns: boolean;
  /** The plan step from which the scripted overflow may be served (see minOverflowSpanTokens). */
  overflowFrom: number;
  /**
   * History a request must carry, besides the system prompt and its newest step, before the
   * server may reject it as too long: recovering an overflow means condensing that history into
   * a checkpoint of up to the summary budget, and a shorter history cannot be condensed.
   */
  minOverflowSpanTokens: number;
}

/** `steps` ≥ 1; `summaryBudget` is the summary request's output cap (tokens). */
export function scheduleDemo(steps: number, summaryBudget: number): DemoSchedule {
  // From 8 steps on, the layout the demo always had: a long first turn, a short second one.
  const second = steps >= 8 ? Math.min(12, Math.max(3, Math.round(steps * 0.12))) : Math.floor(steps * 0.4);
  const turns = second > 0 ? [steps - second, second] : [steps];
  return {
    turns,
    // The first turn's opening steps (a listing, two reads) are the least history worth condensing.
    compactBetweenTurns: turns.length > 1 && turns[0]! >= 3,
    overflowFrom: Math.floor(turns[0]! * 0.55),
    // Twice the budget: the checkpoint then replaces at least twice its own size, a real saving.
    minOverflowSpanTokens: 2 * summaryBudget,
  };
}
