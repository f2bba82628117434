/**
 * The scripted model behind the demo and the agent-loop test: a ScenarioHandler for the local
 * OpenAI-compatible server (src/testing) that answers
 *
 * - an agent request with the plan's next step (tool calls, sometimes parallel ones, or the
 *   turn's final answer), with `usage` counted by a real tokenizer and a simulated prompt
 *   cache (the longest prefix shared with a recent request, in 128-token blocks as OpenAI does);
 * - a summary request (the compaction instruction is the last user message) with a checkpoint
 *   written by the extractive summarizer from the request's own messages, streamed slowly so a
 *   progress indicator has something to show;
 * - one chosen agent request with OpenAI's real `context_length_exceeded` 400, to exercise
 *   overflow recovery (only once there is history to condense, see overflowMinSpanTokens).
 *   The plan does not advance on it, so the retried request gets that step.
 */
import type { ChatMessage } from '../../session/derive';
import { ExtractiveSummarizer } from '../../services/summarizing';
import { COMPACTION_INSTRUCTION } from '../../services/summarizing';
import { getTokenizer } from '../../services/metering';
import type { ChatRequestBody, ParsedChatRequest, Scenario, ScenarioHandler } from '../../testing/openai-server';
import type { PlannedAction } from './plan';

export interface ScriptedCoderOptions {
  plan: readonly PlannedAction[];
  /** The window the overflow error names. */
  contextWindow: number;
  /** Index into the plan whose first request is rejected as too long (none when undefined). */
  overflowAt?: number;
  /**
   * With this, the rejection moves to the first request at or after `overflowAt` whose history
   * (after the system prompt, before the newest assistant step) holds this many tokens: one
   * with less has nothing recovery could condense, so rejecting it would stage a failure.
   */
  overflowMinSpanTokens?: number;
  /** Delay before each agent reply (ms). */
  stepDelayMs?: number;
  /** Delay before a summary starts streaming, and between its chunks (ms). */
  summaryDelayMs?: number;
  summaryChunkDelayMs?: number;
}

export interface ServedRequest {
  /** Index in the server's `requests`. */
  index: number;
  kind: 'agent' | 'summary' | 'overflow';
  /** Plan step answered (agent and overflow). */
  action?: number;
  promptTokens: number;
  cachedTokens: number;
}

export interface ScriptedCoder {
  handler: ScenarioHandler;
  /** What was answered, in order. */
  readonly served: readonly ServedRequest[];
  /** Plan steps answered so far. */
  readonly position: number;
  /** The id the plan gives the k-th call of step i. */
  callId(step: number, k: number): string;
}

const INSTRUCTION_HEAD = COMPACTION_INSTRUCTION.slice(0, 60);

export function isSummaryRequest(body: ChatRequestBody): boolean {
  const last = body.messages?.[body.messages.length - 1];
  return last?.role === 'user' && typeof last.content === 'string' && last.content.startsWith(INSTRUCTION_HEAD);
}

export function createScriptedCoder(options: ScriptedCoderOptions): ScriptedCoder {
  const tokenizer = getTokenizer('o200k_base');
  const summarizer = new ExtractiveSummarizer();
  const served: ServedRequest[] = [];
  const priceCache = new Map<string, number>();
  const recentPrefixes: string[][] = [];
  let position = 0;
  let overflowSent = false;
  const callId = (step: number, k: number) => `call_${String(step).padStart(3, '0')}_${k}`;

  /** What a provider would bill for one message: its text and tool calls plus the chat template. */
  const priceOf = (json: string): number => {
    const cached = priceCache.get(json);
    if (cached !== undefined) return cached;
    const m = JSON.parse(json) as { content?: unknown; tool_calls?: Array<{ function?: { name?: string; arguments?: string } }> };
    let n = 4;
    if (typeof m.content === 'string') n += tokenizer.count(m.content);
    else if (Array.isArray(m.content)) for (const p of m.content as Array<{ text?: string }>) n += tokenizer.count(p.text ?? '');
    for (const c of m.tool_calls ?? []) n += tokenizer.count(c.function?.name ?? '') + tokenizer.count(c.function?.arguments ?? '') + 3;
    priceCache.set(json, n);
    return n;
  };

  /** The tokens overflow recovery could condense: everything between the system prompt and the newest assistant step. */
  const condensable = (body: ChatRequestBody): number => {
    const messages = body.messages ?? [];
    const from = messages[0]?.role === 'system' ? 1 : 0;
    const newest = messages.map((m) => m.role).lastIndexOf('assistant');
    return messages.slice(from, Math.max(from, newest)).reduce((n, m) => n + priceOf(JSON.stringify(m)), 0);
  };

  const account = (body: ChatRequestBody): { promptTokens: number; cachedTokens: number } => {
    const toolsJson = JSON.stringify(body.tools ?? []);
    const parts = [toolsJson, ...(body.messages ?? []).map((m) => JSON.stringify(m))];
    const prices = [body.tools?.length ? tokenizer.count(toolsJson) + 3 : 0, ...parts.slice(1).map(priceOf)];
    const promptTokens = 3 + prices.reduce((a, b) => a + b, 0);
    let shared = 0;
    for (const prev of recentPrefixes) {
      let k = 0;
      while (k < prev.length && k < parts.length && prev[k] === parts[k]) k++;
      shared = Math.max(shared, k);
    }
    const prefixTokens = prices.slice(0, shared).reduce((a, b) => a + b, 0);
    const cachedTokens = prefixTokens >= 1024 ? Math.floor(prefixTokens / 128) * 128 : 0;
    recentPrefixes.unshift(parts);
    recentPrefixes.length = Math.min(recentPrefixes.length, 4);
    return { promptTokens, cachedTokens };
  };

  const summaryReply = async (req: ParsedChatRequest): Promise<Scenario> => {
    const messages = (req.body.messages ?? []) as unknown as ChatMessage[];
    const last = messages[messages.length - 1]!.content;
    const instruction = typeof last === 'string' ? last : JSON.stringify(last);
    let from = messages[0]?.role === 'system' ? 1 : 0;
    // Earlier checkpoints replayed only to keep the prefix cached are background, not input.
    const kept = /The first (\d+) messages after the system prompt are earlier checkpoints/.exec(instruction)?.[1];
    if (kept) from += Number(kept);
    else if (instruction.includes('The first message after the system prompt is an earlier checkpoint')) from += 1;
    const span = messages.slice(from, -1);
    const maxTokens = typeof req.body.max_tokens === 'number' ? req.body.max_tokens : 1024;
    const { text } = await summarizer.summarize(
      {
        system: undefined,
        tools: [],
        context: [],
        messages: span,
        events: [],
        target: { provider: 'local', model: String(req.body.model ?? 'local') },
        maxTokens,
        countTokens: (t) => tokenizer.count(t),
      },
      new AbortController().signal,
    );
    const { promptTokens, cachedTokens } = account(req.body);
    served.push({ index: req.index, kind: 'summary', promptTokens, cachedTokens });
    return {
      kind: 'reply',
      content: text,
      chunks: 12,
      delayMs: options.summaryDelayMs ?? 0,
      chunkDelayMs: options.summaryChunkDelayMs ?? 0,
      usage: { prompt_tokens: promptTokens, completion_tokens: tokenizer.count(text), cached_tokens: cachedTokens },
    };
  };

  const handler: ScenarioHandler = async (req) => {
    if (isSummaryRequest(req.body)) return summaryReply(req);
    const step = position;
    if (options.overflowAt !== undefined && step >= options.overflowAt && !overflowSent && condensable(req.body) >= (options.overflowMinSpanTokens ?? 0)) {
      overflowSent = true;
      const { promptTokens } = account(req.body);
      served.push({ index: req.index, kind: 'overflow', action: step, promptTokens, cachedTokens: 0 });
      // OpenAI's wording and envelope (see OVERFLOW_BODIES.openai), with this window's numbers.
      const claimed = Math.max(promptTokens, options.contextWindow) + 528;
      return {
        kind: 'status',
        status: 400,
        body: {
          error: {
            message: `This model's maximum context length is ${options.contextWindow} tokens. However, your messages resulted in ${claimed} tokens. Please reduce the length of the messages.`,
            type: 'invalid_request_error',
            param: 'messages',
            code: 'context_length_exceeded',
          },
        },
      };
    }
    const action = options.plan[step] ?? { turn: -1, calls: [], final: true, text: 'There is nothing left to do.' };
    position++;
    const { promptTokens, cachedTokens } = account(req.body);
    served.push({ index: req.index, kind: 'agent', action: step, promptTokens, cachedTokens });
    const toolCalls = action.calls.map((c, k) => ({ id: callId(step, k), name: c.name, arguments: JSON.stringify(c.args) }));
    const completion = tokenizer.count((action.text ?? '') + toolCalls.map((c) => c.name + c.arguments).join(''));
    return {
      kind: 'reply',
      ...(action.text !== undefined ? { content: action.text } : {}),
      ...(toolCalls.length > 0 ? { toolCalls } : {}),
      delayMs: options.stepDelayMs ?? 0,
      usage: { prompt_tokens: promptTokens, completion_tokens: completion, cached_tokens: cachedTokens },
    };
  };

  return {
    handler,
    served,
    get position() {
      return position;
    },
    callId,
  };
}
