/**
 * A scripted model for the AI SDK tests, served by the local OpenAI-compatible server: it
 * calls read_log(part) until it has read `steps` parts, then answers; request `overflowAt`
 * (counting agent requests only) is rejected once with OpenAI's overflow 400. Summary
 * requests get a fixed summary (or `summaryScenario`).
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { tool } from 'ai';
import { expect } from 'vitest';
import { z } from 'zod';
import { AiSdkAdapterError, createAiSdkCompaction, type AiSdkCompaction, type AiSdkCompactionOptions } from '../../src/adapters/ai-sdk/index';
import { isCheckpoint, type SessionEvent } from '../../src/session/events';
import { Session } from '../../src/session/session';
import { OVERFLOW_BODIES, startOpenAIServer, type ChatRequestBody, type LocalOpenAIServer, type Scenario } from '../../src/testing/index';
import { openAIMessageProblems } from './openai-validator';

export const WINDOW = 16_384;
export const STEPS = 24;
export const OVERFLOW_AT = 17;

/** A chunk of a "log file": distinct lines, so a summary or a prune really changes the prompt. */
export function chunk(part: number): string {
  const lines: string[] = [];
  for (let i = 0; i < 60; i++) lines.push(`part ${part} line ${i}: worker-${(part * 61 + i) % 17} handled request ${part * 1000 + i} in ${(i * 7) % 113} ms`);
  return lines.join('\n');
}

export interface Script {
  server: LocalOpenAIServer;
  executed: number[];
  agentRequests: () => ChatRequestBody[];
}

/** A summary request ends with the (long) compaction instruction; the tests' own prompts are short. */
export function isSummaryRequest(body: ChatRequestBody): boolean {
  const last = body.messages?.[body.messages.length - 1];
  return last?.role === 'user' && typeof last.content === 'string' && last.content.length > 300;
}

/** The model: calls read_log(part) until it has read STEPS parts, then answers; rejects request `overflowAt` once. */
export async function startScript(overflowAt: number | undefined, summaryScenario?: Scenario): Promise<Script> {
  let agent = 0;
  const handler = (req: { body: ChatRequestBody }): Scenario => {
    if (isSummaryRequest(req.body))
      return summaryScenario ?? { kind: 'reply', content: 'Summary: read log parts so far; workers handle requests in under 113 ms.' };
    const n = agent++;
    if (n === overflowAt) return { kind: 'status', ...OVERFLOW_BODIES.openai };
    const messages = req.body.messages ?? [];
    const last = messages[messages.length - 1];
    if (last?.role === 'user' && typeof last.content === 'string' && last.content.includes('again')) {
      return { kind: 'reply', content: 'Still done.' };
    }
    const part = partCounter.value++;
    if (part >= STEPS) return { kind: 'reply', content: `Read ${STEPS} parts. Done.` };
    return { kind: 'reply', toolCalls: [{ id: `call_${part}`, name: 'read_log', arguments: JSON.stringify({ part }) }] };
  };
  const partCounter = { value: 0 };
  const server = await startOpenAIServer({ scenarios: handler, defaultModel: 'scripted' });
  return {
    server,
    executed: [],
    agentRequests: () =>
      server.requests.filter((r) => r.path === '/v1/chat/completions' && !isSummaryRequest(r.json as ChatRequestBody)).map((r) => r.json as ChatRequestBody),
  };
}

export function setup(
  script: Script,
  extra: Partial<AiSdkCompactionOptions> = {},
): { compaction: AiSdkCompaction; tools: { read_log: ReturnType<typeof readLog> } } {
  const provider = createOpenAICompatible({ name: 'local', baseURL: script.server.baseURL, apiKey: 'test', includeUsage: true });
  const compaction = createAiSdkCompaction({
    model: provider.chatModel('scripted'),
    session: Session.inMemory(),
    contextWindow: WINDOW,
    maxOutputTokens: 1024,
    config: { headroomTokens: 2048, maxTokens: 1024 },
    ...extra,
  });
  return { compaction, tools: { read_log: readLog(script.executed) } };
}

export function readLog(executed: number[]) {
  return tool({
    description: 'Read one part of the service log.',
    inputSchema: z.object({ part: z.number().int() }),
    execute: async ({ part }) => {
      executed.push(part);
      return chunk(part);
    },
  });
}

/** Every request the server received is one a provider accepts, and the loop made more than STEPS. */
export function checkRequests(script: Script): void {
  const bodies = script.server.requests.filter((r) => r.path === '/v1/chat/completions').map((r) => r.json as ChatRequestBody);
  expect(bodies.length).toBeGreaterThan(STEPS);
  for (const [i, body] of bodies.entries()) expect(openAIMessageProblems(body.messages ?? []), `request ${i}`).toEqual([]);
}

/** Pressure compactions that ran inside a step, right after a tool result (mid tool loop). */
export function midLoopCompactions(log: readonly SessionEvent[]): number {
  let openStep = false;
  let last: SessionEvent | undefined;
  let count = 0;
  for (const e of log) {
    if (e.type === 'step/start') openStep = true;
    else if (e.type === 'step/end') openStep = false;
    else if (e.type === 'compaction/start' && e.data.trigger === 'pressure' && openStep && last?.type === 'tool/result') count++;
    if (e.surfaceOp !== undefined && !isCheckpoint(e)) last = e;
  }
  return count;
}

/** The AiSdkAdapterError a call must fail with: its code, and (when given) what its message names. */
export async function adapterError(p: PromiseLike<unknown>, code: string, names?: RegExp): Promise<AiSdkAdapterError> {
  const err = await Promise.resolve(p).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(AiSdkAdapterError);
  expect((err as AiSdkAdapterError).code).toBe(code);
  if (names) expect((err as Error).message).toMatch(names);
  return err as AiSdkAdapterError;
}
