/**
 * The recall tool as an AI SDK tool: `tools: { ...yourTools, ...compaction.tools }` (or
 * `{ recall: recallTool(session) }`). The same executor as the OpenAI definition's.
 *
 * The input schema shows the model recall's parameters but accepts anything: a malformed call
 * must reach the executor, which answers what was wrong as the call's tool result (an
 * `error-text` output the model reads and corrects), instead of the SDK's own validation
 * error, which names the schema rather than the fix.
 */
import { jsonSchema, tool, type JSONSchema7 } from 'ai';
import type { Session } from '../../session/session';
import { RECALL_DESCRIPTION, RECALL_PARAMETERS, RecallIndex, runRecall, type RecallAnswer, type RecallToolOptions } from '../../services/recall/index';

const parameters = jsonSchema<Record<string, unknown>>(RECALL_PARAMETERS, {
  validate: (value) => ({ success: true, value: value as Record<string, unknown> }),
});

/** An AI SDK tool that recalls what this session's checkpoints and prunes took off the context. */
export function recallTool(session: Session, options: RecallToolOptions = {}) {
  RecallIndex.of(session); // the fold over a reopened log is paid now, not in the first call
  return tool({
    description: RECALL_DESCRIPTION,
    inputSchema: parameters,
    execute: async (input: Record<string, unknown>): Promise<RecallAnswer> => runRecall(session, input, options),
    toModelOutput: ({ output }: { output: RecallAnswer }) =>
      output.isError ? { type: 'error-text' as const, value: output.text } : { type: 'text' as const, value: output.text },
  });
}
