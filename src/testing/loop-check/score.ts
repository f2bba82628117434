/**
 * The checker's own mutation score: loops known to be right and loops broken on purpose, each
 * run against scenarios. Every broken loop must be caught by at least one scenario (a report
 * with a violation), and no right one by any. The runs are sequential: checkLoop watches every
 * engine the process creates, so two checks at once would see each other's.
 */
import { checkLoop, type CheckLoopOptions, type UserLoop } from './check';
import type { Invariant } from './invariants';
import type { LoopScenario } from './scenarios';

export interface ScoreRow {
  loop: string;
  /** A reference loop must be caught by none; a broken one by at least one scenario. */
  kind: 'reference' | 'broken';
  scenarios: number;
  /** Names of the scenarios whose report has a violation. */
  caught: string[];
  /** How many of those reports name each invariant. */
  invariants: Partial<Record<Invariant, number>>;
  /** The first violation message, to see why. */
  example: string | undefined;
  ms: number;
}

export interface LoopScore {
  rows: ScoreRow[];
  /** Broken loops caught ÷ broken loops. */
  score: number;
  /** Reference loops caught by any scenario. */
  falseAlarms: number;
  /** 100 % caught and no false alarm. */
  ok: boolean;
}

export interface ScoreLoopsOptions extends CheckLoopOptions {
  /** Scenarios per loop (default: all given); per broken loop, e.g. only the ones its bug touches. */
  scenariosFor?: (loop: string, kind: 'reference' | 'broken') => readonly LoopScenario[];
  /**
   * How long a broken loop may run per scenario (default: `timeoutMs`): one that ignores its
   * signal waits on a hung summary until then. Reference loops get `timeoutMs` (default 20 s).
   */
  brokenTimeoutMs?: number;
  /** Called after each loop's row. */
  onRow?: (row: ScoreRow) => void;
}

/** Runs each loop on the scenarios and scores the checker. */
export async function scoreLoops(
  loops: { reference: Readonly<Record<string, UserLoop>>; broken: Readonly<Record<string, UserLoop>> },
  scenarios: readonly LoopScenario[],
  options: ScoreLoopsOptions = {},
): Promise<LoopScore> {
  const { scenariosFor, onRow, brokenTimeoutMs, ...check } = options;
  const rows: ScoreRow[] = [];
  for (const kind of ['reference', 'broken'] as const) {
    for (const [name, loop] of Object.entries(loops[kind])) {
      const started = Date.now();
      const list = scenariosFor?.(name, kind) ?? scenarios;
      const row: ScoreRow = { loop: name, kind, scenarios: list.length, caught: [], invariants: {}, example: undefined, ms: 0 };
      for (const scenario of list) {
        const report = await checkLoop(loop, scenario, kind === 'broken' && brokenTimeoutMs !== undefined ? { ...check, timeoutMs: brokenTimeoutMs } : check);
        if (report.ok) continue;
        row.caught.push(scenario.name);
        row.example ??= `${scenario.name}: ${report.violations[0]!.invariant}: ${report.violations[0]!.message}`;
        for (const invariant of new Set(report.violations.map((v) => v.invariant))) row.invariants[invariant] = (row.invariants[invariant] ?? 0) + 1;
      }
      row.ms = Date.now() - started;
      rows.push(row);
      onRow?.(row);
    }
  }
  const broken = rows.filter((r) => r.kind === 'broken');
  const falseAlarms = rows.filter((r) => r.kind === 'reference' && r.caught.length > 0).length;
  const score = broken.length === 0 ? 1 : broken.filter((r) => r.caught.length > 0).length / broken.length;
  return { rows, score, falseAlarms, ok: score === 1 && falseAlarms === 0 };
}

/** The score as a Markdown table: loop × scenarios that caught it, and by which invariants. */
export function formatScore(result: LoopScore): string {
  const lines = ['| loop | kind | scenarios that caught it | invariants (reports naming each) |', '|---|---|---|---|'];
  for (const r of result.rows) {
    const mark = r.kind === 'reference' ? (r.caught.length === 0 ? '✓' : '✗ false alarm') : r.caught.length > 0 ? '✓' : '✗ missed';
    const invariants = Object.entries(r.invariants)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `\`${k}\` ${n}`)
      .join(', ');
    lines.push(`| ${r.loop} | ${r.kind} | ${r.caught.length} / ${r.scenarios} ${mark} | ${invariants || '—'} |`);
  }
  const broken = result.rows.filter((r) => r.kind === 'broken');
  lines.push(
    '',
    `Caught: ${broken.filter((r) => r.caught.length > 0).length} of ${broken.length} broken loops (${Math.round(result.score * 100)} %); false alarms: ${result.falseAlarms} of ${result.rows.length - broken.length} reference loops.`,
  );
  return lines.join('\n');
}
