/**
 * A scripted model on the local OpenAI-compatible server of `xcompact/testing`, for the drop-in
 * examples when no OPENAI_BASE_URL is set: no API key, no network. It looks a topic up per step
 * (one tool call each, `steps` of them), then answers; one request is rejected as too long with
 * vLLM's flat error body (which openai 6 reads as "400 status code (no body)"), to show the
 * recovery. Summary requests reach the same server: they end with xcompact's compaction
 * instruction, and are answered with a checkpoint.
 */
// In your application: from 'xcompact/testing'.
import { OVERFLOW_BODIES, startOpenAIServer, type ChatRequestBody, type Scenario } from '../src/testing/index';

export interface LocalModel {
  baseURL: string;
  /** What the server saw: conversation requests, summary requests, overflows it staged. */
  stats: { requests: number; summaries: number; overflows: number };
  close(): Promise<void>;
}

const isSummaryRequest = (body: ChatRequestBody): boolean => {
  const last = body.messages?.at(-1);
  return last?.role === 'user' && typeof last.content === 'string' && last.content.startsWith('You are now acting as a compaction engine');
};

export async function startLocalModel(options: { steps?: number; overflowAt?: number } = {}): Promise<LocalModel> {
  const steps = options.steps ?? 12;
  const overflowAt = options.overflowAt ?? 8;
  const stats = { requests: 0, summaries: 0, overflows: 0 };
  let looked = 0;
  // Call ids unique per server: a session continued by a later run already holds this run's first ids.
  const run = Math.random().toString(36).slice(2, 8);
  const handler = ({ body }: { body: ChatRequestBody }): Scenario => {
    if (isSummaryRequest(body)) {
      stats.summaries++;
      return {
        kind: 'reply',
        content: `## Primary Request and Intent\n- look up ${steps} topics, then answer\n\n## Current Work\n- ${looked} topics looked up`,
      };
    }
    stats.requests++;
    if (stats.requests === overflowAt && stats.overflows === 0) {
      stats.overflows++;
      return { kind: 'status', ...OVERFLOW_BODIES.vllm };
    }
    if (looked < steps) {
      looked++;
      return { kind: 'reply', toolCalls: [{ id: `call_${run}_${looked}`, name: 'lookup', arguments: JSON.stringify({ topic: `topic ${looked}` }) }] };
    }
    return { kind: 'reply', content: `I looked up ${steps} topics; the answer is in topic ${steps}.` };
  };
  const server = await startOpenAIServer({ scenarios: handler, defaultModel: 'local-model' });
  return { baseURL: server.baseURL, stats, close: () => server.close() };
}
