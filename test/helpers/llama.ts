/**
 * A real llama-server (../shared/tools/llama, its tiny model) on a free port, and a logging
 * proxy in front of it that records every exchange from the server's side, whatever the shape
 * (`/v1/chat/completions`, `/v1/responses`, `/v1/messages`): the body as the chat-completions
 * body it stands for (src/testing/shapes-server.ts reads the wire formats on its own, not with
 * the adapters' mapping), the status, and the server's own count of the prompt (its usage, or
 * `n_prompt_tokens` of its 400). `pad(index)` makes the proxy lengthen one request's system
 * prompt past the window, so the real server answers it with its real overflow error.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chatBodyOf } from '../../src/testing/shapes-server';
import type { ChatRequestBody } from '../../src/testing/index';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export function llamaDir(): string | undefined {
  const candidates = [process.env.XCOMPACT_LLAMA_DIR, join(root, '../shared/tools/llama'), join(root, '../../shared/tools/llama')].filter(
    (d): d is string => !!d,
  );
  return candidates.find((d) => existsSync(join(d, 'llama-server')) && existsSync(join(d, 'tiny.gguf')));
}

export function words(): string[] {
  const dir = llamaDir();
  const list = dir ? readFileSync(join(dir, 'words.txt'), 'utf8').split(/\s+/).filter(Boolean) : [];
  return list.length > 0 ? list : 'alpha beta gamma delta'.split(' ');
}

/** A deterministic text of `n` words. */
export function text(n: number, seed: number): string {
  const vocab = words();
  let x = seed >>> 0 || 1;
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out.push(vocab[x % vocab.length]!);
  }
  return out.join(' ');
}

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createNetServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as AddressInfo;
      s.close(() => res(port));
    });
  });
}

export interface Exchange {
  index: number;
  path: string;
  shape: 'chat' | 'responses' | 'messages' | 'other';
  body: ChatRequestBody | undefined;
  status: number;
  /** The server's count of the prompt. */
  promptTokens: number | undefined;
  completionTokens: number | undefined;
  /** The proxy lengthened this one on purpose. */
  padded: boolean;
  /** Tool calls in the request's history with no result after them, and results that answer no call. */
  unanswered: string[];
  orphans: string[];
  /** A summary request (the compaction instruction is its last message). */
  summary: boolean;
}

export interface LlamaProxy {
  /** The proxy's root URL (`/v1` under it). */
  url: string;
  ctx: number;
  exchanges: Exchange[];
  /** The next request to `path` (a shape's endpoint) is padded past the window. */
  padNext(path: string): void;
  stop(): Promise<void>;
}

const shapeOf = (path: string): Exchange['shape'] =>
  path === '/v1/chat/completions' ? 'chat' : path === '/v1/responses' ? 'responses' : path === '/v1/messages' ? 'messages' : 'other';

/** The server's counts, from a JSON body or the events of a stream. */
function countsOf(shape: Exchange['shape'], status: number, text: string): { prompt?: number; completion?: number } {
  if (status !== 200) {
    const m = /"n_prompt_tokens":(\d+)/.exec(text);
    return m ? { prompt: Number(m[1]) } : {};
  }
  let prompt: number | undefined;
  let completion: number | undefined;
  const num = (re: RegExp) => {
    let last: number | undefined;
    for (const m of text.matchAll(re)) last = Number(m[1]);
    return last;
  };
  if (shape === 'chat') {
    prompt = num(/"prompt_tokens":(\d+)/g);
    completion = num(/"completion_tokens":(\d+)/g);
  } else if (shape === 'responses') {
    prompt = num(/"input_tokens":(\d+)/g);
    completion = num(/"output_tokens":(\d+)/g);
  } else if (shape === 'messages') {
    const input = num(/"input_tokens":(\d+)/g);
    const read = num(/"cache_read_input_tokens":(\d+)/g) ?? 0;
    prompt = input === undefined ? undefined : input + read;
    completion = num(/"output_tokens":(\d+)/g);
  }
  return { ...(prompt !== undefined ? { prompt } : {}), ...(completion !== undefined ? { completion } : {}) };
}

function toolBalance(body: ChatRequestBody | undefined): { unanswered: string[]; orphans: string[] } {
  const waiting = new Set<string>();
  const orphans: string[] = [];
  for (const m of body?.messages ?? []) {
    for (const c of (m['tool_calls'] as Array<{ id: string }> | undefined) ?? []) waiting.add(c.id);
    if (m.role === 'tool') {
      const id = String(m['tool_call_id']);
      if (!waiting.delete(id)) orphans.push(id);
    }
  }
  return { unanswered: [...waiting], orphans };
}

/** Starts `llama-server -c ctx -np 1` and the proxy; resolves once the model is loaded. */
export async function startLlamaProxy(ctx = 4096): Promise<LlamaProxy> {
  const dir = llamaDir();
  if (!dir) throw new Error('no llama-server: put llama-server and tiny.gguf in ../shared/tools/llama or set XCOMPACT_LLAMA_DIR');
  const port = await freePort();
  const child: ChildProcess = spawn(
    join(dir, 'llama-server'),
    ['-m', join(dir, 'tiny.gguf'), '--host', '127.0.0.1', '--port', String(port), '-c', String(ctx), '-np', '1', '--jinja', '-t', '2'],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
  const upstream = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + 120_000; ;) {
    if (child.exitCode !== null) throw new Error(`llama-server exited (${child.exitCode}): ${stderr}`);
    if (
      await fetch(`${upstream}/health`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (Date.now() > deadline) throw new Error(`llama-server did not come up: ${stderr}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  const exchanges: Exchange[] = [];
  const pads = new Set<string>();
  // Just past the window (the last prompt the server counted on that path, plus a margin; a
  // word is at least one token): an overflow a compaction can relieve, as a real one is.
  const padFor = (path: string): string => {
    const last = [...exchanges].reverse().find((e) => e.path === path && !e.summary && e.status === 200)?.promptTokens ?? 0;
    return text(Math.max(200, ctx - last + 300), 7);
  };
  const proxy = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0]!;
      const shape = shapeOf(path);
      let raw = Buffer.concat(chunks).toString('utf8');
      let json: Record<string, unknown> | undefined;
      try {
        json = raw ? (JSON.parse(raw) as Record<string, unknown>) : undefined;
      } catch {
        json = undefined;
      }
      let padded = false;
      if (json && pads.has(path)) {
        pads.delete(path);
        padded = true;
        const pad = padFor(path);
        if (shape === 'chat') (json['messages'] as Array<{ content: unknown }>).unshift({ content: pad, role: 'system' } as never);
        else if (shape === 'responses') json['instructions'] = `${pad}\n\n${String(json['instructions'] ?? '')}`;
        else if (shape === 'messages') json['system'] = `${pad}\n\n${typeof json['system'] === 'string' ? json['system'] : ''}`;
        raw = JSON.stringify(json);
      }
      const body = json === undefined || shape === 'other' ? undefined : shape === 'chat' ? (json as ChatRequestBody) : chatBodyOf(shape, json);
      const last = body?.messages?.at(-1);
      const summary = last?.role === 'user' && typeof last.content === 'string' && last.content.includes('You are now acting as a compaction engine');
      const up = httpRequest(`${upstream}${req.url}`, { method: req.method, headers: { ...req.headers, 'content-length': Buffer.byteLength(raw) } }, (r) => {
        res.writeHead(r.statusCode ?? 500, r.headers);
        const got: Buffer[] = [];
        r.on('data', (c: Buffer) => {
          got.push(c);
          res.write(c);
        });
        r.on('end', () => {
          res.end();
          if (shape === 'other') return;
          const status = r.statusCode ?? 0;
          const counts = countsOf(shape, status, Buffer.concat(got).toString('utf8'));
          exchanges.push({
            index: exchanges.length,
            path,
            shape,
            body,
            status,
            promptTokens: counts.prompt,
            completionTokens: counts.completion,
            padded,
            ...toolBalance(body),
            summary,
          });
        });
      });
      up.on('error', () => res.destroy());
      res.on('close', () => {
        if (!res.writableFinished) up.destroy();
      });
      up.end(raw);
    });
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  return {
    url,
    ctx,
    exchanges,
    padNext: (path) => void pads.add(path),
    stop: async () => {
      proxy.closeAllConnections();
      await new Promise<void>((r) => proxy.close(() => r()));
      await new Promise<void>((r) => {
        if (child.exitCode !== null) return r();
        child.once('exit', () => r());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 5000).unref();
      });
    },
  };
}
