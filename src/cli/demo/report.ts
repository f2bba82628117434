/** The demo's final table: what the run did, in one screen (runDemo prints it last). */
import { relative } from 'node:path';
import { createStyle, fmt, pct, seconds, table } from '../ui';

export interface DemoReport {
  steps: number;
  turns: number;
  requests: { total: number; agent: number; summary: number; rejected: number };
  compactions: { total: number; byTrigger: Record<string, number>; failed: number };
  prunes: { results: number; tokensFreed: number };
  peakTokens: number;
  threshold: number;
  window: number;
  tokensSaved: number;
  fullHistoryTokens: number;
  summary: { promptTokens: number; cachedTokens: number };
  overflowRecoveries: number;
  /** Time the agent spent inside afterStep() in total (ms), and how many calls waited for a background summary. */
  agentWaited: { ms: number; waits: number; background: number };
  /** Why the scripted overflow was not served (a run too short to have history worth condensing). */
  overflowSkipped?: string;
  sessionFile: string;
  traceFile: string;
  configFile: string;
  events: number;
  durationMs: number;
}

/** How the user ran us: the installed bin, or the source entry through tsx (`npm start`). */
function selfCommand(): string {
  const entry = process.argv[1] ?? '';
  return entry.endsWith('.ts') ? `npx tsx ${relativePath(entry).replace(/^\.\//, '')}` : 'xcompact';
}

/** A path as the user would type it from here (a PostgreSQL url as it is). */
export function relativePath(p: string): string {
  if (/^postgres(ql)?:\/\//i.test(p)) return p;
  const r = relative(process.cwd(), p);
  return r.startsWith('..') ? p : `./${r}`;
}

export function renderReport(r: DemoReport, style = createStyle(false)): string {
  const triggers = Object.entries(r.compactions.byTrigger)
    .map(([k, v]) => `${v} ${k}`)
    .join(', ');
  const rows: Array<[string, string]> = [
    ['steps', `${r.steps} in ${r.turns} turns`],
    ['requests', `${r.requests.total} (${r.requests.agent} agent, ${r.requests.summary} summary, ${r.requests.rejected} rejected on purpose)`],
    ['compactions', `${r.compactions.total}${triggers ? ` (${triggers})` : ''}${r.compactions.failed ? `, ${r.compactions.failed} failed` : ''}`],
    ['prunes', `${r.prunes.results} tool results, −${fmt(r.prunes.tokensFreed)} tokens`],
    ['peak request', `${fmt(r.peakTokens)} tokens of a ${fmt(r.window)} window (${pct(r.peakTokens, r.window)}; threshold ${fmt(r.threshold)})`],
    ['full history', `${fmt(r.fullHistoryTokens)} tokens (${(r.fullHistoryTokens / r.window).toFixed(1)}× the window) without compaction`],
    ['tokens saved', `${fmt(r.tokensSaved)} (sum of before − after over compactions and prunes)`],
    [
      'summary requests',
      `${r.requests.summary}, ${fmt(r.summary.promptTokens)} prompt tokens, ${pct(r.summary.cachedTokens, r.summary.promptTokens)} served from the prompt cache`,
    ],
    ['overflow recovery', r.overflowSkipped ?? `${r.overflowRecoveries} rejected request recovered and retried`],
    [
      'agent waited',
      `${seconds(r.agentWaited.ms)} inside afterStep() in total (${r.agentWaited.background} summaries prepared in the background, ${r.agentWaited.waits} step${r.agentWaited.waits === 1 ? '' : 's'} waited for one)`,
    ],
    ['session', `${relativePath(r.sessionFile)} (${r.events} events) — try: ${selfCommand()} inspect ${relativePath(r.sessionFile)}`],
    [
      'trace',
      `${relativePath(r.traceFile)} — load it in visualizer/index.html (or open index.html?trace=<path of trace.js>; during a run, index.html?follow=<path of trace.live.js> follows it live)`,
    ],
    ['time', seconds(r.durationMs)],
  ];
  return `${style.bold('summary')}\n${table(rows)}`;
}
