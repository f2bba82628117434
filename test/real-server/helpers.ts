/**
 * The real-server suite's parts (docs/testing.md): a real `llama-server` (the one built in
 * ../shared/tools/llama, with its tiny model) started by the test on a free port, and a logging
 * proxy in front of it that records every exchange from the server's side: the body sent, the
 * status, the server's own `usage.prompt_tokens` (or the counts of its 400), and the headers the
 * test's fetch adds (whether xcompact's engine checked the request, what it measured it at).
 *
 * Nothing here decides anything about xcompact: the figures are read back from the exchanges.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { InspectionEvent } from 'xstate';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../..');

/** Where the server and its model are: XCOMPACT_LLAMA_DIR, else ../shared/tools/llama beside the repo (or beside its worktree folder). */
export function llamaDir(): string | undefined {
  const candidates = [process.env.XCOMPACT_LLAMA_DIR, join(root, '../shared/tools/llama'), join(root, '../../shared/tools/llama')].filter(
    (d): d is string => !!d,
  );
  return candidates.find((d) => existsSync(join(d, 'llama-server')) && existsSync(join(d, 'tiny.gguf')));
}

export const HOW_TO_GET_A_SERVER =
  'real-server suite skipped: no llama-server. Put a built llama-server and tiny.gguf in ../shared/tools/llama (or set XCOMPACT_LLAMA_DIR); ' +
  'to build it: npm pack node-llama-cpp@3.21.1, git clone package/llama/gitRelease.bundle llama.cpp, ' +
  'cmake -B build -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF -DCMAKE_BUILD_TYPE=Release && cmake --build build --target llama-server -j2';

/** The words the tiny model speaks (and the tool results are made of). */
export function words(): string[] {
  const dir = llamaDir();
  const list = dir ? readFileSync(join(dir, 'words.txt'), 'utf8').split(/\s+/).filter(Boolean) : [];
  return list.length > 0 ? list : 'alpha beta gamma delta'.split(' ');
}

/** A deterministic text of `n` words drawn from `vocab`, with digits and paths mixed in as code has them. */
export function text(vocab: readonly string[], n: number, seed: number): string {
  let x = seed >>> 0 || 1;
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    const w = vocab[x % vocab.length]!;
    out.push(i % 17 === 16 ? `${w}_${x % 9973}` : i % 29 === 28 ? `src/${w}.ts:${x % 400}` : w);
  }
  return out.join(' ');
}

export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createNetServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => res(port));
    });
  });
}

export interface Llama {
  url: string;
  ctx: number;
  stop(): Promise<void>;
}

/** `llama-server -m tiny.gguf -c <ctx> -np 1 --jinja` on a free port; resolves once /health says the model is loaded. */
export async function startLlama(ctx = 4096): Promise<Llama> {
  const dir = llamaDir();
  if (!dir) throw new Error(HOW_TO_GET_A_SERVER);
  const port = await freePort();
  const child: ChildProcess = spawn(
    join(dir, 'llama-server'),
    ['-m', join(dir, 'tiny.gguf'), '--host', '127.0.0.1', '--port', String(port), '-c', String(ctx), '-np', '1', '--jinja', '-t', '2'],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`llama-server exited (${child.exitCode}): ${stderr}`);
    const ok = await fetch(`${url}/health`)
      .then((r) => r.ok)
      .catch(() => false);
    if (ok) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`llama-server did not come up in 120 s: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return {
    url,
    ctx,
    stop: () =>
      new Promise<void>((res) => {
        if (child.exitCode !== null) return res();
        child.once('exit', () => res());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 5000).unref();
      }),
  };
}

/** One chat request as the server saw it. */
export interface Exchange {
  index: number;
  path: string;
  /** Sent by the agent loop (the header the test sets), not a summary. */
  agent: boolean;
  body: { messages?: Array<Record<string, unknown>>; tools?: unknown[]; max_tokens?: number } | undefined;
  status: number;
  /** The server's own count of the prompt: usage.prompt_tokens, or n_prompt_tokens of a 400. */
  promptTokens: number | undefined;
  maxTokens: number | undefined;
  finishReason: string | undefined;
  errorMessage: string | undefined;
  /** What xcompact's meter measured the request at when it left (the test's fetch header). */
  estimate: number | undefined;
  /** Pressure checks the engine had run when the request left (cumulative, the test's fetch header). */
  checks: number | undefined;
  /** The process that sent it (the test's fetch header): a SIGKILL/resume child, or the test itself. */
  proc: string | undefined;
}

export interface Proxy {
  url: string;
  exchanges: Exchange[];
  /** Chat requests only. */
  chats(): Exchange[];
  close(): Promise<void>;
}

const header = (h: IncomingHttpHeaders, name: string): string | undefined => {
  const v = h[name];
  return Array.isArray(v) ? v[0] : v;
};

/** A logging proxy in front of `target` (plain HTTP, the whole response buffered, then passed on unchanged). */
export async function startProxy(target: string): Promise<Proxy> {
  const exchanges: Exchange[] = [];
  const to = new URL(target);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const headers = { ...req.headers, host: to.host };
      delete headers['content-length'];
      const up = httpRequest(
        { host: to.hostname, port: to.port, method: req.method, path: req.url, headers: { ...headers, 'content-length': String(raw.length) } },
        (upRes) => {
          const back: Buffer[] = [];
          upRes.on('data', (c: Buffer) => back.push(c));
          upRes.on('end', () => {
            const payload = Buffer.concat(back);
            const path = (req.url ?? '/').split('?')[0]!;
            if (path.endsWith('/chat/completions')) exchanges.push(readExchange(exchanges.length, path, req.headers, raw, upRes.statusCode ?? 0, payload));
            res.writeHead(upRes.statusCode ?? 502, upRes.headers);
            res.end(payload);
          });
          upRes.on('error', () => res.destroy());
        },
      );
      up.on('error', (err) => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `proxy: ${err.message}` } }));
      });
      up.end(raw);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    exchanges,
    chats: () => exchanges,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

function readExchange(index: number, path: string, h: IncomingHttpHeaders, raw: Buffer, status: number, payload: Buffer): Exchange {
  let body: Exchange['body'];
  try {
    body = JSON.parse(raw.toString('utf8')) as Exchange['body'];
  } catch {
    body = undefined;
  }
  const answer = payload.toString('utf8');
  let json: Record<string, any> | undefined;
  try {
    json = JSON.parse(answer) as Record<string, any>;
  } catch {
    // A stream: its last usage chunk.
    for (const line of answer.split('\n')) {
      if (!line.startsWith('data: ') || line.includes('[DONE]')) continue;
      try {
        const chunk = JSON.parse(line.slice(6)) as Record<string, any>;
        if (chunk.usage) json = { ...chunk, choices: json?.choices ?? chunk.choices };
        else if (chunk.choices?.[0]?.finish_reason) json = { ...(json ?? {}), choices: [{ finish_reason: chunk.choices[0].finish_reason }] };
      } catch {
        // not a JSON line
      }
    }
  }
  const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));
  const maxTokens = body?.max_tokens ?? (body as { max_completion_tokens?: number } | undefined)?.max_completion_tokens;
  return {
    index,
    path,
    agent: header(h, 'x-test-agent') === '1',
    body,
    status,
    promptTokens: json?.usage?.prompt_tokens ?? json?.error?.n_prompt_tokens,
    maxTokens,
    finishReason: json?.choices?.[0]?.finish_reason,
    errorMessage: json?.error?.message,
    estimate: num(header(h, 'x-test-estimate')),
    checks: num(header(h, 'x-test-checks')),
    proc: header(h, 'x-test-proc'),
  };
}

/** Counts the pressure checks the engine's root actor is asked for (`step.completed`): pass as the engine's `inspect`. */
export function checkCounter(): { inspect: (e: InspectionEvent) => void; count(): number } {
  let n = 0;
  return {
    inspect: (e) => {
      // Only the facade sends step.completed, to the root actor (no source actor).
      if (e.type === '@xstate.event' && e.event.type === 'step.completed' && e.sourceRef === undefined) n++;
    },
    count: () => n,
  };
}

/**
 * A fetch that tells the proxy what xcompact knew when the request left: the checks run so far
 * and the meter's figure (read when the request is sent, so after its check).
 */
export function reportingFetch(info: () => { checks: number; estimate: number | undefined }, proc: string): typeof fetch {
  return (input, init) => {
    const headers = new Headers(init?.headers);
    const { checks, estimate } = info();
    headers.set('x-test-checks', String(checks));
    if (estimate !== undefined) headers.set('x-test-estimate', String(estimate));
    headers.set('x-test-proc', proc);
    return fetch(input, { ...init, headers });
  };
}

/** Tool calls in a request's history without a tool message answering them, and results answering no call. */
export function unpaired(messages: ReadonlyArray<Record<string, unknown>>): string[] {
  const problems: string[] = [];
  const waiting = new Set<string>();
  for (const m of messages) {
    if (m.role === 'tool') {
      if (!waiting.delete(String(m.tool_call_id))) problems.push(`result ${String(m.tool_call_id)} answers no call`);
      continue;
    }
    if (waiting.size > 0) problems.push(`calls ${[...waiting].join(',')} unanswered before a ${String(m.role)} message`);
    waiting.clear();
    for (const c of (m.tool_calls as Array<{ id: string }> | undefined) ?? []) waiting.add(c.id);
  }
  if (waiting.size > 0) problems.push(`calls ${[...waiting].join(',')} unanswered at the end`);
  return problems;
}

/** Tool calls in a request's history whose arguments are not JSON (what llama.cpp answers 500 for). */
export function brokenCalls(messages: ReadonlyArray<Record<string, unknown>>): number {
  let n = 0;
  for (const m of messages) {
    for (const c of (m.tool_calls as Array<{ function?: { arguments?: string } }> | undefined) ?? []) {
      try {
        JSON.parse(c.function?.arguments ?? '');
      } catch {
        n++;
      }
    }
  }
  return n;
}

export interface Figures {
  requests: number;
  agentRequests: number;
  overWindow: number;
  overWindowWithOutput: number;
  brokenHistory500: number;
  unchecked: number;
  maxPromptRatio: number;
  /** Σ our measured figure ÷ Σ the server's count, over agent requests that reported one. */
  tokenizerRatio: number;
  /** The lowest and highest single-request ratio. */
  tokenizerRange: [number, number];
  unpaired: string[];
}

/** The suite's figures, from the server's side. */
export function figures(exchanges: readonly Exchange[], ctx: number): Figures {
  const agent = exchanges.filter((e) => e.agent);
  let ours = 0;
  let theirs = 0;
  let lo = Infinity;
  let hi = 0;
  let unchecked = 0;
  const lastChecks = new Map<string, number>();
  for (const e of agent) {
    const proc = e.proc ?? '';
    const before = lastChecks.get(proc) ?? 0;
    if (e.checks === undefined || e.checks <= before) unchecked++;
    lastChecks.set(proc, e.checks ?? before);
    if (e.estimate !== undefined && e.promptTokens !== undefined && e.status === 200) {
      ours += e.estimate;
      theirs += e.promptTokens;
      lo = Math.min(lo, e.estimate / e.promptTokens);
      hi = Math.max(hi, e.estimate / e.promptTokens);
    }
  }
  return {
    requests: exchanges.length,
    agentRequests: agent.length,
    overWindow: exchanges.filter((e) => (e.promptTokens ?? 0) > ctx || (e.status === 400 && /context/i.test(e.errorMessage ?? ''))).length,
    overWindowWithOutput: agent.filter((e) => (e.promptTokens ?? 0) + (e.maxTokens ?? 0) > ctx).length,
    brokenHistory500: exchanges.filter((e) => e.status === 500 && /parse tool call arguments/i.test(e.errorMessage ?? '')).length,
    unchecked,
    maxPromptRatio: Math.max(0, ...exchanges.map((e) => (e.promptTokens ?? 0) / ctx)),
    tokenizerRatio: theirs > 0 ? ours / theirs : NaN,
    tokenizerRange: [lo, hi],
    unpaired: exchanges.flatMap((e) => unpaired(e.body?.messages ?? []).map((p) => `request ${e.index}: ${p}`)),
  };
}
