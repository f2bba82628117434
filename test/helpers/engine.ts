/**
 * Test harness for the engine: a session with a small model window, a scripted agent step
 * writer, and summarizers whose timing the test controls.
 */
import { Session } from '../../src/session/session';
import { SessionWriter } from '../../src/session/writer';
import {
  createCompactionEngine,
  type CompactionEngine,
  type AfterStepResult,
  type CompactionEngineOptions,
  type EngineNotification,
} from '../../src/engine/facade';
import type { Summarizer, SummaryRequest, SummaryResult } from '../../src/services/summarizing';
import { SummarizerError } from '../../src/services/summarizing';
import { frameCheckpoint } from '../../src/services/summarizing';
import { getTokenizer } from '../../src/services/metering';

export const SMALL_MODEL = { 'test/small': { contextWindow: 6000, maxOutputTokens: 500 } };
// The cost model off: these tests are about the threshold's rules (test/engine/economics.test.ts has the cost model's).
export const SMALL_CONFIG = { headroomTokens: 500, maxTokens: 400, thresholdRatio: 0.8, retainRatio: 0.2, economics: false } as const;
export const SYSTEM_PROMPT = 'You are a coding agent. Keep answers short.';

/** A summarizer that records its requests and answers with a fixed short text. */
export function recordingSummarizer(text = 'The user asked to fix the build; files were listed.'): Summarizer & { calls: SummaryRequest[] } {
  const calls: SummaryRequest[] = [];
  return {
    name: 'recording',
    calls,
    async summarize(req) {
      calls.push(req);
      return { text, requests: 1, model: req.target.model };
    },
  };
}

/** A summarizer whose every call waits for the test to resolve or reject it. */
export function deferredSummarizer(): Summarizer & {
  calls: Array<{ req: SummaryRequest; signal: AbortSignal; resolve: (r: SummaryResult) => void; reject: (e: unknown) => void }>;
  /** Resolves with the i-th call (0-based) once it has been made. */
  call(i: number): Promise<{ req: SummaryRequest; signal: AbortSignal; resolve: (r: SummaryResult) => void; reject: (e: unknown) => void }>;
} {
  const calls: Array<{ req: SummaryRequest; signal: AbortSignal; resolve: (r: SummaryResult) => void; reject: (e: unknown) => void }> = [];
  const waiters: Array<() => void> = [];
  return {
    name: 'deferred',
    calls,
    summarize(req, signal) {
      return new Promise<SummaryResult>((resolve, reject) => {
        calls.push({ req, signal, resolve, reject });
        for (const w of waiters.splice(0)) w();
      });
    },
    async call(i) {
      while (calls.length <= i) await new Promise<void>((r) => waiters.push(r));
      return calls[i]!;
    },
  };
}

export function failingSummarizer(code: ConstructorParameters<typeof SummarizerError>[0] = 'summary-truncated'): Summarizer {
  return {
    name: 'failing',
    async summarize() {
      throw new SummarizerError(code, `scripted ${code}`);
    },
  };
}

export interface Harness {
  session: Session;
  writer: SessionWriter;
  engine: CompactionEngine;
  events: EngineNotification[];
  /** One agent step: request header, assistant with one tool call, its result (not ended). */
  toolStep(i: number, resultText?: string): void;
  /** toolStep + afterStep + endStep. */
  step(i: number, resultText?: string): ReturnType<CompactionEngine['afterStep']>;
  types(from?: number): string[];
}

export function harness(options: Partial<CompactionEngineOptions> & { summarizer: Summarizer }, session: Session = Session.inMemory()): Harness {
  const writer = new SessionWriter(session);
  const engine = createCompactionEngine({
    session,
    models: SMALL_MODEL,
    config: SMALL_CONFIG,
    ...options,
  });
  const events: EngineNotification[] = [];
  engine.on((e) => events.push(e));
  const request = () => writer.request({ provider: 'test', model: 'small', systemPrompt: SYSTEM_PROMPT, tools: [], maxTokens: 500 });
  const toolStep = (i: number, resultText = `file${i}.ts\n`.repeat(60)) => {
    writer.startStep();
    request();
    writer.assistant({ text: `step ${i}`, toolCalls: [{ id: `c${i}`, name: 'bash', arguments: JSON.stringify({ command: `ls dir${i}` }) }] });
    writer.toolResult(`c${i}`, resultText, { toolName: 'bash' });
  };
  return {
    session,
    writer,
    engine,
    events,
    toolStep,
    async step(i, resultText) {
      toolStep(i, resultText);
      const r = await engine.afterStep();
      writer.endStep();
      return r;
    },
    types(from = 0) {
      return session
        .events()
        .slice(from)
        .map((e) => e.type);
    },
  };
}

/** Starts a turn with the system prompt and a user request. */
export function openTurn(h: Harness, text = 'Please fix the build.'): void {
  h.writer.startTurn();
  h.writer.request({ provider: 'test', model: 'small', systemPrompt: SYSTEM_PROMPT, tools: [], maxTokens: 500 });
  h.writer.user(text);
}

/**
 * Steps (`text(i)` as each tool result) until the engine reports something other than `below`:
 * that result and its step, or no result after `limit` steps. `seen` collects every answer.
 */
export async function stepsUntilPressure(
  h: Pick<Harness, 'step'>,
  { from = 0, limit = 60, text, seen }: { from?: number; limit?: number; text?: (i: number) => string; seen?: AfterStepResult[] } = {},
): Promise<{ result: AfterStepResult | undefined; index: number }> {
  for (let i = from; i < from + limit; i++) {
    const r = await h.step(i, text?.(i));
    seen?.push(r);
    if (r.status !== 'below') return { result: r, index: i };
  }
  return { result: undefined, index: from + limit };
}

/** Steps until the engine reports something other than `below`; returns that result. */
export async function stepUntilPressure(h: Harness, from = 0, limit = 60) {
  const { result, index } = await stepsUntilPressure(h, { from, limit });
  if (!result) throw new Error('pressure never qualified');
  return { result, index };
}

/**
 * A summarizer whose checkpoint costs `share` of the span it replaces (read from the
 * engine's compaction.started notification), to test the shrink and progress guards.
 */
export function sizedSummarizer(events: EngineNotification[], share: () => number): Summarizer & { calls: number } {
  const tokenizer = getTokenizer('o200k_base');
  const self = {
    name: 'sized',
    calls: 0,
    async summarize(): Promise<SummaryResult> {
      self.calls++;
      const started = [...events].reverse().find((e) => e.type === 'compaction.started');
      if (!started || started.type !== 'compaction.started') throw new Error('no compaction.started seen');
      const target = Math.floor(started.spanTokens * share());
      const textOf = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`).join(' ') || 'x';
      const cost = (n: number) => tokenizer.count(frameCheckpoint(textOf(n))) + 4;
      // Binary search for the word count whose framed checkpoint reaches the target.
      let lo = 0;
      let hi = Math.max(1, target);
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (cost(mid) < target) lo = mid + 1;
        else hi = mid;
      }
      return { text: textOf(lo), requests: 1 };
    },
  };
  return self;
}

/** Another writer's replacement of the first tool result on the surface (its text becomes `cut`): a span a summary is being written for changes under it. */
export function replaceFirstToolResult(h: Harness): void {
  const inSpan = h.session.surface
    .slice(0)
    .map((seq) => h.session.event(seq))
    .find((e) => e.type === 'tool/result')!;
  h.session.append({
    ...(inSpan as never as object),
    type: 'tool/result',
    data: { ...(inSpan.data as object), content: [{ type: 'text', text: 'cut' }] },
    surfaceOp: { op: 'replace', start: inSpan.seq, end: inSpan.seq },
    sourceEventSeqs: [inSpan.seq],
  } as never);
}
