import OpenAI from 'openai';
import { Session, withCompaction, type EngineNotification } from 'xcompact';

const client = withCompaction(new OpenAI(), { session: Session.inMemory(), models: { 'my-model': { contextWindow: 32_768 } } });
client.compaction.engine.on((e: EngineNotification) => {
  if (e.type === 'compaction.committed') console.log(`${e.trigger}: ${e.shadowedNodes} messages → 1 checkpoint, ${e.tokensBefore} → ${e.tokensAfter} tokens`);
  if (e.type === 'pruned') console.log(`pruned ${e.count} tool results, −${e.tokensFreed} tokens`);
  if (e.type === 'compaction.failed') console.log(`compaction failed: ${e.error.code}: ${e.error.message}`);
});
const m = client.compaction.engine.measure(); // { totalTokens, threshold, contextWindow, surfaceTokens, envelopeTokens, … }
console.log(m.totalTokens, m.threshold, client.compaction.provider, client.compaction.session.length);
