/**
 * The local server's `POST /tokenize`, as llama.cpp and vLLM serve it, with a vocabulary of its
 * own, so a test can tell the server's counts from any in-process tokenizer's.
 */
import type { ServerResponse } from 'node:http';
import { sendJson } from './responses';
import type { ChatRequestBody, RecordedRequest, TokenizeOptions } from './scenarios';

export type { TokenizeOptions } from './scenarios';

/** One token per started 4 UTF-8 bytes. */
export function bytesPerFour(text: string): number {
  return Math.ceil(Buffer.byteLength(text, 'utf8') / 4);
}

/** One token per digit; each run of other characters one token per started 4 UTF-8 bytes. */
export function digitTokens(text: string): number {
  let n = 0;
  for (const run of text.match(/\d|\D+/g) ?? []) n += /\d/.test(run) && run.length === 1 ? 1 : bytesPerFour(run);
  return n;
}

/** The prompt tokens of a chat request in `count`'s vocabulary (see TokenizeOptions.usage). */
export function chatPromptTokens(body: ChatRequestBody, count: (text: string) => number): number {
  let n = 3 + (body.tools && body.tools.length > 0 ? count(JSON.stringify(body.tools)) : 0);
  for (const m of body.messages ?? []) {
    n += 4;
    const content = m.content;
    if (typeof content === 'string') n += count(content);
    else if (Array.isArray(content))
      for (const part of content as Array<{ type?: string; text?: unknown }>) if (part.type === 'text' && typeof part.text === 'string') n += count(part.text);
    const calls = m.tool_calls as Array<{ function?: { name?: string; arguments?: string } }> | undefined;
    for (const c of calls ?? []) n += 3 + count(c.function?.name ?? '') + count(c.function?.arguments ?? '');
  }
  return n;
}

/** Answers one tokenize request (after `sleep(delayMs)`). */
export async function serveTokenize(o: TokenizeOptions, rec: RecordedRequest, res: ServerResponse, sleep: (ms: number) => Promise<void>): Promise<void> {
  await sleep(o.delayMs ?? 0);
  if (res.destroyed) return;
  const b = (typeof rec.json === 'object' && rec.json !== null ? rec.json : {}) as { content?: unknown; prompt?: unknown };
  const dialect = o.dialect ?? 'any';
  const text = dialect === 'llama.cpp' ? b.content : dialect === 'vllm' ? b.prompt : (b.content ?? b.prompt);
  if (typeof text !== 'string') {
    const wanted =
      dialect === 'llama.cpp'
        ? '{"content": string}'
        : dialect === 'vllm'
          ? '{"prompt": string}'
          : '{"content": string} (llama.cpp) or {"prompt": string} (vLLM)';
    sendJson(res, 400, { error: { code: 400, message: `POST /tokenize needs ${wanted}`, type: 'invalid_request_error' } });
    return;
  }
  const count = (o.count ?? bytesPerFour)(text);
  const tokens = Array.from({ length: count }, (_, i) => i);
  if (dialect === 'llama.cpp') sendJson(res, 200, { tokens });
  else if (dialect === 'vllm') sendJson(res, 200, { count, max_model_len: 8192, tokens });
  else sendJson(res, 200, { tokens, count });
}
