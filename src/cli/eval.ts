/**
 * `xcompact eval <transcript>…`: replays each transcript (an xcompact session, or a pi, Claude
 * Code or Codex transcript) through xcompact with the user's config and through the simulated
 * peer policies of src/eval, at each window, and prints per transcript and window what each
 * policy cost and what it remembered. The harness's own compactions are taken out first
 * (withoutCompactions): every policy decides on the same conversation. Model-free by default
 * (the extractive summarizer); `--summarizer openai --base-url URL` writes real summaries.
 */
import type { CliEnv } from './ui';
import { writeFile } from 'node:fs/promises';
import { basename } from 'node:path';
import OpenAI from 'openai';
import { DEFAULT_WINDOWS, PRICES, evaluateWindow, type WindowEval } from '../eval';
import { withoutCompactions } from '../eval/lived';
import { OpenAISummarizer, type Summarizer } from '../services/summarizing';
import { Session } from '../session/session';
import type { SessionEvent } from '../session/events';
import { Pricer } from '../eval/pricing';
import { asRecorded, recordedOverhead } from '../eval/recorded';
import { loadConfig } from './config-file';
import { CliError } from './errors';
import { renderEvalReport } from './eval-report';
import { rowsOf, verdictOf, type EvaluatedTranscript, type Prices, type SentOverhead } from './eval-rows';
import { detectFormat, importHarnessTranscript, loadSessionReadOnly, readInput } from './load';
import { createStyle, fmt, useColor } from './ui';

export { rowsOf, type EvalRow, type EvaluatedTranscript, type Prices } from './eval-rows';

export interface EvalCliOptions {
  /** The environment the command reads ($OPENAI_BASE_URL, the API key variable); default process.env. */
  env?: CliEnv;
  window?: string;
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

/**
 * Loads one transcript for the replay: imported in memory, the harness's compactions taken
 * out. What the harness sent beyond the messages is replayed too: the system prompt it
 * recorded (Codex's instructions) and, for what it did not record (Claude Code's system prompt
 * and tool definitions), a stand-in system prompt of the size its recorded usage implies (the
 * first request's input tokens minus what the messages count): every policy pays it alike.
 */
async function loadTranscript(file: string): Promise<{ session: Session; recorded: Session; format: string; overhead: SentOverhead }> {
  const bytes = await readInput(file);
  const format = detectFormat(file, bytes);
  if (format === 'messages')
    throw new CliError(`${file} is a .json file of chat messages: eval replays transcripts (JSONL: xcompact, pi, Claude Code or Codex).`, 2);
  const loaded = await loadSessionReadOnly(file, bytes, format);
  const recorded = loaded.session;
  const first = recorded.surface.length > 0 ? recorded.event(recorded.surface.seqAt(0)) : undefined;
  const recordedSystem = first?.type === 'system/message' ? first.data.text : undefined;
  const pricer = new Pricer('o200k_base');
  const tokens = format === 'xcompact' ? 0 : recordedOverhead(recorded, pricer);
  const overhead: SentOverhead = { recordedSystemPrompt: recordedSystem !== undefined, standInTokens: tokens };
  if (tokens === 0 || format === 'xcompact') return { session: withoutCompactions(recorded), recorded, format, overhead };
  const standIn = standInPrompt(tokens, pricer);
  const session = Session.inMemory(recorded.id);
  importHarnessTranscript(file, bytes, format, session, { systemPrompt: recordedSystem === undefined ? standIn : `${recordedSystem}\n\n${standIn}` });
  return { session: withoutCompactions(session), recorded, format, overhead };
}

/** A system prompt of about `tokens` tokens that says what it stands for. */
export function standInPrompt(tokens: number, pricer: Pricer): string {
  const head = `[The system prompt and tool definitions the harness sent are not in the transcript; its recorded usage implies about ${tokens} tokens of them, stood in for here.]`;
  const have = pricer.count(head);
  if (have >= tokens) return head;
  const unit = ' stand-in';
  const per = Math.max(1, pricer.count(unit.repeat(100)) / 100);
  let filler = unit.repeat(Math.floor((tokens - have) / per));
  // One correction: the count of the whole is what the replay prices.
  const over = pricer.count(head + filler) - tokens;
  if (over > 0) filler = filler.slice(0, Math.max(0, filler.length - Math.ceil(over / per) * unit.length));
  return head + filler;
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

export async function runEval(
  files: string[],
  options: EvalCliOptions = {},
  out: NodeJS.WritableStream = process.stdout,
  err: NodeJS.WritableStream = process.stderr,
): Promise<EvaluatedTranscript[]> {
  if (files.length === 0) throw new CliError('name at least one transcript to evaluate.', 2);
  const windows = parseWindows(options.window);
  const prices = parsePrices(options.prices);
  const summarizer = summarizerFor(options);
  const config = options.config ? loadConfig(options.config, files[0]!).input : {};
  const loaded = [];
  for (const file of files) loaded.push({ file, ...(await loadTranscript(file)) });
  const policies = 5;
  const requestsOf = (s: Session) => s.events().filter((e) => e.type === 'assistant/message').length;
  const total = loaded.reduce((n, l) => n + requestsOf(l.session) * windows.length * policies, 0);
  const bar = progressBar(err, total);
  const results: EvaluatedTranscript[] = [];
  try {
    for (const l of loaded) {
      const evals: WindowEval[] = [];
      for (const window of windows) {
        evals.push(
          await evaluateWindow(l.session, window, {
            config,
            prices,
            ...(summarizer ? { summarizer } : {}),
            onRequest: (p) => bar.tick(`${basename(l.file)} ${fmt(window)} ${p.policy}`),
          }),
        );
      }
      results.push({
        file: l.file,
        format: l.format,
        requests: requestsOf(l.session),
        windows: evals,
        overhead: l.overhead,
        ...(l.format === 'xcompact' ? {} : { recorded: windows.map((w) => asRecorded(l.recorded, w, prices)) }),
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
  return {
    file: t.file,
    format: t.format,
    requests: t.requests,
    ...(t.overhead ? { overhead: t.overhead } : {}),
    windows: t.windows.map((w, i) => ({
      window: w.window,
      ...(t.recorded?.[i] ? { asRecorded: t.recorded[i] } : {}),
      rows: rowsOf(w),
      verdict: verdictOf(w).policy ?? null,
    })),
  };
}

/** The line that says what the replay sends beyond the messages. */
export function overheadLine(t: EvaluatedTranscript): string | undefined {
  const o = t.overhead;
  if (!o) return undefined;
  const parts = [
    o.recordedSystemPrompt ? 'the recorded system prompt' : undefined,
    o.standInTokens > 0
      ? `a stand-in of ${fmt(o.standInTokens)} tokens for what the recorded usage shows was sent unrecorded (system prompt, tools)`
      : undefined,
  ].filter(Boolean);
  return parts.length === 0 ? 'replayed: the messages only (no usage recorded to size a system prompt or tools by)' : `replayed with ${parts.join(' and ')}`;
}

const percent = (x: number | undefined) => (x === undefined ? '–' : `${(100 * x).toFixed(1)}%`);

export function renderEvalTables(results: readonly EvaluatedTranscript[], style = createStyle(false)): string {
  const head = ['policy', 'cost', 'cache-miss tok', 'compactions', 'prunes', 'peak÷win', '>win', 'needed recall', 'after compaction', 'intent recall'];
  const blocks: string[] = [];
  for (const t of results) {
    t.windows.forEach((w, wi) => {
      const rec = t.recorded?.[wi];
      const recordedRow =
        rec && rec.requestsWithUsage > 0
          ? [
              'as recorded',
              `$${rec.cost.toFixed(2)}`,
              '–',
              String(rec.compactions),
              '–',
              (rec.peak / w.window).toFixed(2),
              String(rec.overWindow),
              '–',
              '–',
              '–',
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
  }
  return blocks.join('\n\n');
}
