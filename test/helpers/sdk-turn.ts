/**
 * One agent turn through the official openai SDK, as an agent loop records it: the user's text,
 * one request of the session's derived messages, the reply recorded with its usage, then
 * `afterStep()`. Shared by the server-tokenizer test and its bench (bench/server-tokenizer.ts).
 */
import type OpenAI from 'openai';
import type { Session } from '../../src/session/session';
import { SessionWriter } from '../../src/session/writer';

export interface SdkTurn {
  session: Session;
  client: OpenAI;
  engine: { afterStep(): Promise<unknown> };
  provider: string;
  model: string;
  /** Recorded as surface node 0 when the session is empty. */
  system: string;
}

export async function sdkTurn(t: SdkTurn, text: string): Promise<void> {
  const { session, client, engine, provider, model, system } = t;
  const w = new SessionWriter(session);
  if (session.surface.length === 0) w.system(system);
  w.startTurn();
  w.user(text);
  w.startStep();
  w.request({ provider, model, systemPrompt: system, tools: [] });
  const c = await client.chat.completions.create({ model, messages: [...session.deriveMessages()], max_tokens: 64 });
  w.assistantFromCompletion(c.choices[0]!.message, { usage: c.usage ?? null, provider, model, finishReason: c.choices[0]!.finish_reason });
  await engine.afterStep();
  w.endStep();
  w.endTurn('completed');
}
