/**
 * An outside-shaped session log (docs/measured.md): what an agent that records its own work with the
 * public API writes — `Session.open` on a `JsonlStore` and a `SessionWriter`, no engine — over a
 * long coding session whose tool results are code. Generated deterministically (a seeded PRNG,
 * the code from the pinned `typescript` devDependency's lib/typescript.js), so every run and
 * every machine times the same bytes.
 *
 * Shape (the defaults; `describe()` prints what was written): turns of 4–30 steps, each turn a
 * user message and, per step, a request header (3 tools), the model's reply (one to three tool
 * calls, now and then a line of text, provider usage growing with the conversation) and one
 * result per call: a `read` of 6–80 lines of code, a `grep` of 3–22 matching lines, or a
 * `bash` run's output; the turn's last step is a text reply. About 80k events, 38 MB.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Session, SessionWriter, type SessionStore } from '../src/session/index';

export interface OutsideLogOptions {
  /** Stop at the first turn end at or past this many events (default 80,000). */
  events?: number;
  seed?: number;
}

export interface OutsideLogShape {
  events: number;
  bytes: number;
  turns: number;
  steps: number;
  toolResults: number;
  /** Median and 90th percentile of a tool result's text, in characters. */
  resultMedian: number;
  resultP90: number;
}

/** mulberry32: a small seeded PRNG, the same sequence on every platform. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function codeLines(): string[] {
  const file = createRequire(import.meta.url).resolve('typescript/lib/typescript.js');
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim().length > 0);
}

const TOOLS = [
  { name: 'read', description: 'Read lines of a file.', properties: { path: { type: 'string' }, offset: { type: 'integer' } } },
  { name: 'grep', description: 'Search the files.', properties: { pattern: { type: 'string' } } },
  { name: 'bash', description: 'Run a command.', properties: { command: { type: 'string' } } },
].map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: { type: 'object', properties: t.properties } } }));

const SYSTEM = 'You are a coding agent working in a TypeScript repository. Read before you edit, run the tests after every change, and keep answers short.';

/** Writes the log as session `id` of `store` (which must not hold it yet) and returns its shape (bytes: 0; the caller knows the file). */
export async function writeOutsideLog(store: SessionStore, id: string, options: OutsideLogOptions = {}): Promise<Omit<OutsideLogShape, 'bytes'>> {
  const target = options.events ?? 80_000;
  const rand = prng(options.seed ?? 54);
  const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  /** Long-tailed: most results short, a few long, as tool output is. */
  const skewed = (lo: number, hi: number) => lo + Math.floor(rand() * rand() * (hi - lo + 1));
  const lines = codeLines();
  const snippet = (n: number) => {
    const at = int(0, lines.length - n - 1);
    return lines.slice(at, at + n);
  };
  const path = () => `src/${['compiler', 'services', 'server', 'harness'][int(0, 3)]}/file${int(0, 499)}.ts`;

  const session = await Session.open(store, id);
  const w = new SessionWriter(session);
  const header = { provider: 'openai', model: 'gpt-4o', systemPrompt: SYSTEM, tools: TOOLS, maxTokens: 8_192 };
  w.system(SYSTEM);
  let chars = SYSTEM.length + JSON.stringify(TOOLS).length;
  let turns = 0;
  let steps = 0;
  const sizes: number[] = [];
  let call = 0;
  while (session.length < target) {
    w.startTurn();
    turns++;
    const ask = `Task ${turns}: ${snippet(1)[0]!.trim().slice(0, 120)} — find where this is handled and fix the failing case.`;
    w.user(ask);
    chars += ask.length;
    const stepsThisTurn = int(4, 30);
    for (let s = 0; s < stepsThisTurn; s++) {
      w.startStep();
      steps++;
      w.request(header);
      const last = s === stepsThisTurn - 1;
      const promptTokens = Math.round(chars / 3.7) + 12;
      const usage = { promptTokens, completionTokens: int(20, 400), cachedTokens: Math.max(0, promptTokens - int(200, 2_000)) };
      if (last) {
        const text = `Done: ${snippet(1)[0]!.trim().slice(0, 200)}`;
        w.assistant({ text, usage, finishReason: 'stop' });
        chars += text.length;
        w.endStep();
        break;
      }
      const k = rand() < 0.7 ? 1 : rand() < 0.67 ? 2 : 3;
      const calls = Array.from({ length: k }, () => {
        const kind = rand() < 0.6 ? 'read' : rand() < 0.6 ? 'grep' : 'bash';
        const id = `call_${(call++).toString(36)}`;
        const args =
          kind === 'read'
            ? { path: path(), offset: int(1, 4_000), limit: 200 }
            : kind === 'grep'
              ? { pattern: snippet(1)[0]!.trim().split(/\W+/).filter(Boolean)[0] ?? 'node', path: 'src' }
              : {
                  command: `npx vitest run test/${path()
                    .replace(/^src\//, '')
                    .replace(/\.ts$/, '.test.ts')}`,
                };
        return { id, name: kind, arguments: JSON.stringify(args) };
      });
      const text = rand() < 0.15 ? 'Let me look at the code around it first.' : undefined;
      w.assistant({ ...(text ? { text } : {}), toolCalls: calls, usage, finishReason: 'tool_calls' });
      for (const c of calls) {
        let out: string;
        if (c.name === 'read') out = snippet(skewed(6, 80)).join('\n');
        else if (c.name === 'grep')
          out = snippet(skewed(3, 22))
            .map((l, i) => `${path()}:${int(1, 4_000) + i}:${l.trim()}`)
            .join('\n');
        else
          out = `${snippet(skewed(2, 30)).join('\n')}\n\n Test Files  1 failed | ${int(1, 40)} passed\n      Tests  ${int(1, 9)} failed | ${int(10, 400)} passed`;
        w.toolResult(c.id, out, { toolName: c.name });
        sizes.push(out.length);
        chars += out.length + c.arguments.length;
      }
      w.endStep();
    }
    w.endTurn();
    if (turns % 20 === 0) await session.flush();
  }
  const events = session.length;
  await session.close();
  sizes.sort((a, b) => a - b);
  return {
    events,
    turns,
    steps,
    toolResults: sizes.length,
    resultMedian: sizes[sizes.length >> 1]!,
    resultP90: sizes[Math.floor(sizes.length * 0.9)]!,
  };
}

export function describe(shape: OutsideLogShape): string {
  return (
    `${shape.events.toLocaleString('en-US')} events, ${(shape.bytes / 1e6).toFixed(1)} MB: ${shape.turns.toLocaleString('en-US')} turns, ` +
    `${shape.steps.toLocaleString('en-US')} steps, ${shape.toolResults.toLocaleString('en-US')} tool results (read/grep/bash of TypeScript; ` +
    `median ${shape.resultMedian.toLocaleString('en-US')} chars, p90 ${shape.resultP90.toLocaleString('en-US')}), written with Session + SessionWriter and no engine`
  );
}
