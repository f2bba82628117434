/**
 * `xcompact eval <transcript>…`: replays each transcript (an xcompact session, or a pi, Claude
 * Code or Codex transcript) through xcompact with the user's config and through the simulated
 * peer policies of src/eval, at each window, and prints per transcript and window what each
 * policy cost and what it remembered. The harness's own compactions are taken out first
 * (withoutCompactions): every policy decides on the same conversation. Model-free by default
 * (the extractive summarizer); `--summarizer openai --base-url URL` writes real summaries.
 */
import type { CliEnv } from './ui';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import OpenAI from 'openai';
import { DEFAULT_WINDOWS, PEERS, PRICES, evaluateWindow, type WindowEval } from '../eval';
import { calibratedPricer, fitReplayCalibration, type CalibrationFit } from '../eval/calibration';
import { withoutCompactions } from '../eval/lived';
import { OpenAISummarizer, type Summarizer } from '../services/summarizing';
import { Session } from '../session/session';
import { Pricer } from '../eval/pricing';
import { asRecorded, recordedMemory, usageCost } from '../eval/recorded';
import { compareHarnessSummaries, type SummaryComparison } from '../eval/harness-summaries';
import { replayUserWords } from '../eval/xcompact';
import { importTranscript } from '../transcripts/import';
import { checkWindow, smallestWindow, WindowTooSmallError } from '../eval/window';
import { loadConfig } from './config-file';
import { CliError } from './errors';
import { renderEvalReport } from './eval-report';
import { rowsOf, verdictOf, type CompactionCall, type EvaluatedTranscript, type Prices, type SentOverhead } from './eval-rows';
import { detectFormat, loadSessionReadOnly, readInput } from './load';
import { createStyle, fmt, useColor } from './ui';

export { rowsOf, type EvalRow, type EvaluatedTranscript, type Prices } from './eval-rows';

export interface EvalCliOptions {
  /** The environment the command reads ($OPENAI_BASE_URL, the API key variable); default process.env. */
  env?: CliEnv;
  window?: string;
  /** Tokens the harness sent unrecorded on every request (default: fitted to the recorded usage). */
  unrecorded?: string;
  config?: string;
  prices?: string;
  report?: string;
  summarizer?: 'extractive' | 'openai';
  baseUrl?: string;
  apiKeyEnv?: string;
  json?: boolean;
  color?: boolean;
}

/** "32k,128k" → [32768, 131072]; plain token counts too. k = 1,024 tokens, m = 1,048,576. */
export function parseWindows(text: string | undefined): number[] {
  if (text === undefined) return [...DEFAULT_WINDOWS];
  const out = text.split(',').map((part) => {
    const m = /^\s*(\d+(?:\.\d+)?)\s*([km]?)\s*$/i.exec(part);
    const n = m ? Math.round(Number(m[1]) * (m[2]!.toLowerCase() === 'k' ? 1024 : m[2]!.toLowerCase() === 'm' ? 1024 * 1024 : 1)) : NaN;
    if (!Number.isSafeInteger(n) || n < 1024)
      throw new CliError(`--window "${part.trim()}" is not a window: write token counts like 32k,128k or 32768 (at least 1k).`, 2);
    return n;
  });
  return [...new Set(out)];
}

const PRICE_KEYS = ['input', 'cacheRead', 'cacheWrite', 'output'] as const;

/**
 * `--prices 3,0.3,3.75,15` (dollars per million tokens: input, cache read, cache write,
 * output), or some of them by name: `--prices input=1.25,output=10`; the rest keep their default.
 */
export function parsePrices(text: string | undefined): Prices {
  if (text === undefined) return PRICES;
  const parts = text.split(',').map((p) => p.trim());
  const bad = (why: string) =>
    new CliError(
      `--prices "${text}": ${why}; write four dollar amounts per million tokens (input,cacheRead,cacheWrite,output) like 3,0.3,3.75,15, or named ones like input=1.25,output=10.`,
      2,
    );
  const value = (v: string) => {
    const n = Number(v);
    if (v === '' || !Number.isFinite(n) || n < 0) throw bad(`"${v}" is not a price`);
    return n;
  };
  if (parts.every((p) => !p.includes('='))) {
    if (parts.length !== 4) throw bad(`${parts.length} amounts`);
    return { input: value(parts[0]!), cacheRead: value(parts[1]!), cacheWrite: value(parts[2]!), output: value(parts[3]!) };
  }
  const out: Record<string, number> = { ...PRICES };
  for (const p of parts) {
    const [key, v] = p.split('=') as [string, string | undefined];
    if (!(PRICE_KEYS as readonly string[]).includes(key) || v === undefined) throw bad(`"${p}" names no price (${PRICE_KEYS.join(', ')})`);
    out[key] = value(v);
  }
  return out as Prices;
}

/** One transcript, ready to replay. */
interface LoadedTranscript {
  file: string;
  /** The harness's compaction calls recorded beside the session. */
  calls: CompactionCall[];
  format: string;
  /** As imported: the harness's compactions are checkpoints. */
  recorded: Session;
  /** As lived: the harness's compactions taken out (withoutCompactions). */
  session: Session;
  /** The count every policy is billed and judged by: calibrated to the recorded usage. */
  pricer: Pricer;
  fit: CalibrationFit;
  overhead: SentOverhead;
}

/**
 * Loads one transcript for the replay: imported in memory, the harness's compactions taken
 * out, and the replay's count fitted to the recorded usage (calibration.ts): every policy's
 * requests are counted as the harness's provider counted its own, the system prompt and tools
 * it sent unrecorded included. `unrecorded` (--unrecorded) overrides the fitted figure for that part.
 */
async function loadTranscript(file: string, unrecorded: number | undefined): Promise<LoadedTranscript> {
  const bytes = await readInput(file);
  const format = detectFormat(file, bytes);
  if (format === 'messages')
    throw new CliError(`${file} is a .json file of chat messages: eval replays transcripts (xcompact, pi, Claude Code, Codex or Gemini CLI sessions).`, 2);
  const loaded = await loadSessionReadOnly(file, bytes, format);
  const recorded = loaded.session;
  const first = recorded.surface.length > 0 ? recorded.event(recorded.surface.seqAt(0)) : undefined;
  const raw = new Pricer('o200k_base');
  const fit = fitReplayCalibration(recorded, raw);
  const calibration = unrecorded === undefined ? fit.calibration : { ...fit.calibration, unrecorded };
  const session = withoutCompactions(recorded);
  const overhead: SentOverhead = {
    recordedSystemPrompt: first?.type === 'system/message',
    unrecordedTokens: calibration.unrecorded,
    unrecordedFrom: unrecorded !== undefined ? 'option' : fit.fidelity ? 'fitted' : 'no usage',
  };
  return { file, format, recorded, session, pricer: calibratedPricer(recorded, calibration, raw), fit, overhead, calls: [] };
}

/**
 * The compaction calls Claude Code recorded for a session (its summary requests run as a
 * subagent: `agent-acompact-*.jsonl` under `<session-id>/subagents/` beside the session file,
 * or beside it), recognised by the session id their records name; each one's usage.
 */
async function compactionCallsOf(file: string, bytes: Buffer, prices: Prices): Promise<CompactionCall[]> {
  const id = /"sessionId":\s*"([^"]+)"/.exec(bytes.toString('utf8', 0, Math.min(bytes.length, 1 << 20)))?.[1];
  if (id === undefined) return [];
  const dir = dirname(file);
  const candidates: string[] = [];
  for (const d of [dir, join(dir, id, 'subagents'), join(dir, basename(file).replace(/\.jsonl$/i, ''), 'subagents')]) {
    let names: string[];
    try {
      names = await readdir(d);
    } catch {
      continue;
    }
    for (const n of names) if (/^agent-acompact.*\.jsonl$/.test(n)) candidates.push(join(d, n));
  }
  const out: CompactionCall[] = [];
  // A compaction call evaluated on its own is no call beside itself.
  for (const path of [...new Set(candidates)].filter((p) => resolve(p) !== resolve(file))) {
    const text = await readFile(path, 'utf8').catch(() => '');
    if (!text.includes(`"sessionId":"${id}"`) && !text.includes(`"sessionId": "${id}"`)) continue;
    const call = Session.inMemory('compaction-call');
    try {
      importTranscript(call, text, 'claude-code');
    } catch {
      continue;
    }
    const c: CompactionCall = { file: path, promptTokens: 0, cachedTokens: 0, outputTokens: 0, cost: 0 };
    for (const e of call.events()) {
      const u = e.type === 'assistant/message' ? e.data.usage : undefined;
      if (!u) continue;
      c.promptTokens += u.promptTokens;
      c.cachedTokens += u.cachedTokens ?? 0;
      c.outputTokens += u.completionTokens;
      c.cost += usageCost(u, prices);
    }
    if (c.promptTokens > 0) out.push(c);
  }
  return out;
}

/**
 * The windows each transcript is replayed at. Windows the user named must all be workable for
 * every transcript (smallestWindow: the unrecorded part, a summary and the output reservation),
 * else the run is refused before any replay. Of the default windows, those too small for a
 * transcript are left out for it, and when none is left it is replayed at its smallest
 * workable window; each with a note.
 */
function windowsFor(l: LoadedTranscript, windows: readonly number[], named: boolean, unrecordedFlag: boolean, note: (line: string) => void): number[] {
  const unrecorded = l.overhead.unrecordedTokens;
  const smallest = smallestWindow(unrecorded);
  const name = basename(l.file);
  const what = unrecordedFlag
    ? 'as --unrecorded says'
    : 'its system prompt and tool definitions, or history before the file starts; fitted to its recorded usage';
  const fits = windows.filter((w) => w >= smallest);
  if (named) {
    const bad = windows.find((w) => w < smallest);
    if (bad === undefined) return fits;
    try {
      checkWindow(bad, unrecorded, name);
    } catch (err) {
      if (!(err instanceof WindowTooSmallError)) throw err;
      throw new CliError(
        `--window ${fmt(bad)}: ${name} sent about ${fmt(unrecorded)} tokens on every request that its transcript does not hold (${what}); ` +
          `with a summary and the output reservation no request fits in ${fmt(bad)} tokens, so every policy would send every request over it. ` +
          `Pass --window ${Math.ceil(smallest / 1_024)}k (${fmt(smallest)} tokens) or more${unrecordedFlag ? '' : ', or --unrecorded 0 to replay the recorded messages alone (or --unrecorded <tokens> to set that part yourself)'}.`,
        2,
        { cause: err },
      );
    }
  }
  const left = windows.filter((w) => w < smallest);
  if (left.length === 0) return fits;
  const out = fits.length > 0 ? fits : [smallest];
  note(
    `${name}: window${left.length === 1 ? '' : 's'} ${left.map((w) => fmt(w)).join(', ')} left out: it sent about ${fmt(unrecorded)} tokens on every request that its transcript does not hold (${what}), ` +
      `so no request fits below ${fmt(smallest)} tokens${fits.length === 0 ? `; replayed at ${fmt(smallest)} instead` : ''}. Name windows with --window.`,
  );
  return out;
}

/** A one-line progress bar on a TTY; nothing elsewhere (a pipe, a CI log). */
export function progressBar(stream: NodeJS.WriteStream | NodeJS.WritableStream, total: number): { tick(label: string): void; done(): void } {
  const tty = (stream as NodeJS.WriteStream).isTTY === true;
  let n = 0;
  let last = -1;
  return {
    tick(label) {
      n++;
      if (!tty) return;
      const share = Math.min(1, n / total);
      const step = Math.floor(share * 200);
      if (step === last) return;
      last = step;
      const width = 28;
      const full = Math.round(share * width);
      stream.write(`\r[${'#'.repeat(full)}${'.'.repeat(width - full)}] ${String(Math.round(share * 100)).padStart(3)}% ${label.slice(0, 40).padEnd(40)}`);
    },
    done() {
      if (tty) stream.write(`\r${' '.repeat(80)}\r`);
    },
  };
}

function summarizerFor(options: EvalCliOptions): Summarizer | undefined {
  if ((options.summarizer ?? 'extractive') === 'extractive') return undefined;
  const baseURL = options.baseUrl ?? (options.env ?? process.env).OPENAI_BASE_URL;
  if (!baseURL) throw new CliError('--summarizer openai needs --base-url (or $OPENAI_BASE_URL): the endpoint that writes the summaries.', 2);
  let url: URL;
  try {
    url = new URL(baseURL);
  } catch {
    throw new CliError(`--base-url "${baseURL}" is not a URL: pass e.g. https://api.deepseek.com/v1 or http://127.0.0.1:8080/v1.`, 2);
  }
  const envName = options.apiKeyEnv ?? 'OPENAI_API_KEY';
  const apiKey = (options.env ?? process.env)[envName];
  const local = ['127.0.0.1', 'localhost', '[::1]', '::1'].includes(url.hostname);
  if (!apiKey && !local)
    throw new CliError(
      `no API key: the environment variable ${envName} is not set; export it, name another with --api-key-env, or leave --summarizer at extractive (no network).`,
      2,
    );
  return new OpenAISummarizer({ client: new OpenAI({ baseURL, apiKey: apiKey || 'not-needed', maxRetries: 1, timeout: 120_000 }) });
}

/** `--unrecorded 42k` / `42400`: tokens, k = 1,024. */
export function parseUnrecorded(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(k?)\s*$/i.exec(text);
  const n = m ? Math.round(Number(m[1]) * (m[2] === '' ? 1 : 1024)) : NaN;
  if (!Number.isSafeInteger(n) || n < 0)
    throw new CliError(
      `--unrecorded "${text}" is not a token count: write e.g. 0, 42400 or 41k (what the harness sent on every request that its transcript does not hold).`,
      2,
    );
  return n;
}

export async function runEval(
  files: string[],
  options: EvalCliOptions = {},
  out: NodeJS.WritableStream = process.stdout,
  err: NodeJS.WritableStream = process.stderr,
): Promise<EvaluatedTranscript[]> {
  if (files.length === 0) throw new CliError('name at least one transcript to evaluate.', 2);
  const windows = parseWindows(options.window);
  const prices = parsePrices(options.prices);
  const unrecorded = parseUnrecorded(options.unrecorded);
  const summarizer = summarizerFor(options);
  const config = options.config ? loadConfig(options.config, files[0]!).input : {};
  const loaded: Array<LoadedTranscript & { windows: number[] }> = [];
  const notes: string[] = [];
  for (const file of files) {
    const l = await loadTranscript(file, unrecorded);
    if (l.format === 'claude-code') l.calls = await compactionCallsOf(file, await readInput(file), prices);
    loaded.push({ ...l, windows: windowsFor(l, windows, options.window !== undefined, unrecorded !== undefined, (n) => notes.push(n)) });
  }
  for (const n of notes) err.write(`note: ${n}\n`);
  const policies = 1 + PEERS.length;
  const requestsOf = (s: Session) => s.events().filter((e) => e.type === 'assistant/message').length;
  const total = loaded.reduce((n, l) => n + requestsOf(l.session) * l.windows.length * policies, 0);
  const bar = progressBar(err, total);
  const results: EvaluatedTranscript[] = [];
  try {
    for (const l of loaded) {
      const evals: WindowEval[] = [];
      for (const window of l.windows) {
        evals.push(
          await evaluateWindow(l.session, window, {
            config,
            prices,
            pricer: l.pricer,
            ...(summarizer ? { summarizer } : {}),
            onRequest: (p) => bar.tick(`${basename(l.file)} ${fmt(window)} ${p.policy}`),
          }),
        );
      }
      // A harness's transcript: its own run is a row of its own (an xcompact session is xcompact's run, already a row).
      const harness = l.format !== 'xcompact';
      const callsCost = l.calls.reduce((n, c) => n + c.cost, 0);
      const largest = Math.max(...l.windows);
      const cap = Math.min(4_096, Math.floor(largest / 4));
      const summaries = harness
        ? await compareHarnessSummaries(l.recorded, l.pricer, {
            ...(summarizer ? { summarizer } : {}),
            maxTokens: cap,
            userWordsTokens: replayUserWords({ window: largest, maxOutputTokens: cap, summaryCap: cap }, config),
          })
        : [];
      results.push({
        file: l.file,
        format: l.format,
        requests: requestsOf(l.session),
        windows: evals,
        overhead: l.overhead,
        calibration: l.fit.calibration,
        ...(l.fit.fidelity ? { fidelity: l.fit.fidelity } : {}),
        ...(harness
          ? { recorded: l.windows.map((w) => asRecorded(l.recorded, w, prices, callsCost)), recordedMemory: recordedMemory(l.recorded, l.session) }
          : {}),
        ...(summaries.length > 0 ? { harnessSummaries: summaries } : {}),
        ...(l.calls.length > 0 ? { compactionCalls: l.calls } : {}),
      });
    }
  } finally {
    bar.done();
  }
  if (options.json) out.write(`${JSON.stringify(results.map(summaryOf), null, 2)}\n`);
  else out.write(`${renderEvalTables(results, createStyle(useColor(options.color !== false, out)))}\n`);
  if (options.report) {
    await writeFile(options.report, renderEvalReport(results, { prices }), 'utf8');
    if (!options.json) out.write(`report: ${options.report}\n`);
  }
  return results;
}

function summaryOf(t: EvaluatedTranscript) {
  const memory = t.recordedMemory;
  return {
    file: t.file,
    format: t.format,
    requests: t.requests,
    ...(t.overhead ? { overhead: t.overhead } : {}),
    ...(t.calibration ? { calibration: t.calibration } : {}),
    fidelity: t.fidelity ? { median: t.fidelity.median, p90: t.fidelity.p90, max: t.fidelity.max, requests: t.fidelity.requests } : null,
    windows: t.windows.map((w, i) => ({
      window: w.window,
      ...(t.recorded?.[i]
        ? {
            asRecorded: {
              ...t.recorded[i],
              ...(memory
                ? { neededRecall: memory.neededRecall, recallAfterCompaction: memory.recallAfterCompaction ?? null, intentRecall: memory.intentRecall }
                : {}),
            },
          }
        : {}),
      rows: rowsOf(w),
      verdict: verdictOf(w).policy ?? null,
    })),
    ...(t.harnessSummaries ? { harnessSummaries: t.harnessSummaries } : {}),
    ...(t.compactionCalls ? { compactionCalls: t.compactionCalls } : {}),
  };
}

/** The harness's own summaries beside xcompact's of the same span, one line each, and its recorded compaction calls. */
export function summariesBlock(t: EvaluatedTranscript, style = createStyle(false)): string | undefined {
  const list = t.harnessSummaries ?? [];
  if (list.length === 0 && !t.compactionCalls) return undefined;
  const score = (s: SummaryComparison['harness']) =>
    `${fmt(s.tokens)} tokens · needed ${percent(s.neededRecall)} (first request ${percent(s.firstRequestRecall)}) · intent ${percent(s.intentRecall)}`;
  return [
    style.bold(
      `${basename(t.file)} — the harness's own summaries beside xcompact's of the same span (scored on the requests it sent until its next compaction)`,
    ),
    ...list.map(
      (c, i) =>
        `  #${i + 1} (seq ${c.seq}, ${fmt(c.shadowed)} events condensed, ${fmt(c.requests)} requests): harness ${score(c.harness)}  |  xcompact ${score(c.xcompact)}`,
    ),
    ...(t.compactionCalls ?? []).map(
      (c) =>
        `  the harness's compaction call ${basename(c.file)}: ${fmt(c.promptTokens)} prompt tokens (${fmt(c.cachedTokens)} cached), ${fmt(c.outputTokens)} output, $${c.cost.toFixed(2)} (in the as-recorded cost)`,
    ),
  ].join('\n');
}

/** The line that says what the replay sends beyond the messages, and how closely its count follows the recorded usage. */
export function overheadLine(t: EvaluatedTranscript): string | undefined {
  const o = t.overhead;
  if (!o) return undefined;
  const parts = [
    o.recordedSystemPrompt ? 'the recorded system prompt' : undefined,
    o.unrecordedTokens > 0
      ? `${fmt(o.unrecordedTokens)} tokens per request for what the harness sent unrecorded (system prompt, tools${o.unrecordedFrom === 'option' ? '; --unrecorded' : ''})`
      : undefined,
  ].filter(Boolean);
  const c = t.calibration;
  const f = t.fidelity;
  const counted =
    c && f
      ? `; counted as its provider did (×${c.ratio.toFixed(2)} our tokens, fitted to ${fmt(f.requests)} recorded requests: median error ${percent(f.median)}, p90 ${percent(f.p90)})`
      : '';
  return parts.length === 0 && counted === ''
    ? 'replayed: the messages only (no usage recorded to fit a count or size a system prompt and tools by)'
    : `replayed with ${parts.length === 0 ? 'the messages only' : parts.join(' and ')}${counted}`;
}

const percent = (x: number | undefined) => (x === undefined ? '–' : `${(100 * x).toFixed(1)}%`);

export function renderEvalTables(results: readonly EvaluatedTranscript[], style = createStyle(false)): string {
  const head = ['policy', 'cost', 'cache-miss tok', 'compactions', 'prunes', 'peak÷win', '>win', 'needed recall', 'after compaction', 'intent recall'];
  const blocks: string[] = [];
  for (const t of results) {
    t.windows.forEach((w, wi) => {
      const rec = t.recorded?.[wi];
      const m = t.recordedMemory;
      const recordedRow = rec
        ? [
            'as recorded',
            rec.requestsWithUsage > 0 ? `$${rec.cost.toFixed(2)}` : '–',
            '–',
            String(rec.compactions),
            '–',
            rec.requestsWithUsage > 0 ? (rec.peak / w.window).toFixed(2) : '–',
            rec.requestsWithUsage > 0 ? String(rec.overWindow) : '–',
            percent(m?.neededRecall),
            percent(m?.recallAfterCompaction),
            percent(m?.intentRecall),
          ]
        : undefined;
      const rows = rowsOf(w).map((r) => [
        r.policy,
        `$${r.cost.toFixed(2)}`,
        fmt(r.cacheMissTokens),
        String(r.compactions),
        String(r.prunes),
        r.peakShare.toFixed(2),
        String(r.overWindow),
        percent(r.neededRecall),
        percent(r.recallAfterCompaction),
        percent(r.intentRecall),
      ]);
      if (recordedRow) rows.unshift(recordedRow);
      const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
      const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
      const note = overheadLine(t);
      blocks.push(
        [
          style.bold(`${basename(t.file)} (${t.format}, ${fmt(t.requests)} requests) — window ${fmt(w.window)} tokens`),
          ...(note ? [`  ${style.dim(note)}`] : []),
          `  ${style.dim(line(head))}`,
          ...rows.map((r) => `  ${line(r)}`),
          `  ${verdictOf(w).line}`,
        ].join('\n'),
      );
    });
    const summaries = summariesBlock(t, style);
    if (summaries) blocks.push(summaries);
  }
  return blocks.join('\n\n');
}
