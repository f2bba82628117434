/**
 * The XState agent example (examples/xstate-agent.ts) with recall on, against the local server:
 * its chart records the model's recall call and answers it from the session log like any other
 * tool, after a compaction took the first read off the context.
 */
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';
import { runXStateAgent } from '../../../examples/xstate-agent';
import { isCheckpoint, type SessionEvent } from '../../../src/session/events';
import { Session } from '../../../src/session/session';
import { startOpenAIServer, type LocalOpenAIServer } from '../../../src/testing/openai-server';
import { recallScript } from '../../helpers/recall-script';

describe('examples/xstate-agent.ts with recall on', () => {
  let server: LocalOpenAIServer | undefined;
  afterAll(async () => server?.close());

  it('the chart answers a recall call from the log after a compaction', async () => {
    const script = recallScript('read_notes');
    server = await startOpenAIServer({ scenarios: script.handler, defaultModel: 'tiny' });
    const session = Session.inMemory();
    const run = await runXStateAgent({
      client: new OpenAI({ baseURL: server.baseURL, apiKey: 'test', maxRetries: 0 }),
      session,
      provider: 'local',
      model: 'tiny',
      contextWindow: 4096,
      maxTokens: 256,
      config: { headroomTokens: 512, maxTokens: 256, economics: false, background: false, recall: true },
      task: 'Read every module, then tell me the retry limit.',
      maxSteps: 20,
    });
    expect(run.compactions.length).toBeGreaterThanOrEqual(1);
    expect(session.events().some(isCheckpoint)).toBe(true);
    // The read tool of this example returns notes (not the module's text): recall brings back that first result.
    expect(script.recalled).toHaveLength(1);
    const firstRead = session.events().find((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result' && e.data.toolName === 'read_notes')!;
    expect(script.recalled[0]).toContain((firstRead.data.content[0] as { text: string }).text);
    const recalled = session.events().find((e): e is SessionEvent<'tool/result'> => e.type === 'tool/result' && e.data.toolName === 'recall')!;
    expect((recalled.data.content[0] as { text: string }).text).toBe(script.recalled[0]);
    await session.close();
  });
});
