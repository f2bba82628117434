/**
 * A scripted model that needs recall, for the end-to-end tests: it reads FILES one per step,
 * the session compacts on the way, and the summary it writes names the files but holds none
 * of their text. Once a checkpoint is in its prompt it asks recall for the first file by path,
 * and answers with the line it was after (or says it could not find it).
 */
import type { ChatRequestBody, Scenario } from '../../src/testing/index';

export const FILES = Array.from({ length: 8 }, (_, i) => `src/module${i}.ts`);
export const NEEDLE = 'export const RETRY_LIMIT = 7; // the line the model needs after compaction';

export function fileBody(path: string): string {
  const lines = [`// ${path}`];
  for (let i = 0; i < 70; i++) lines.push(`export function ${path.replace(/\W/g, '_')}_f${i}(x: number): number { return x * ${i} + ${i % 13}; }`);
  if (path === FILES[0]) lines.splice(35, 0, NEEDLE);
  return lines.join('\n');
}

export function isSummaryRequest(body: ChatRequestBody): boolean {
  const last = body.messages?.[body.messages.length - 1];
  return last?.role === 'user' && typeof last.content === 'string' && last.content.length > 300 && !last.content.startsWith('Read');
}

type Message = NonNullable<ChatRequestBody['messages']>[number];
const text = (m: Message | undefined): string => (typeof m?.content === 'string' ? m.content : JSON.stringify(m?.content ?? ''));

export interface RecallScript {
  handler: (req: { body: ChatRequestBody }) => Scenario;
  /** The recall answers the model read (tool messages following its recall calls). */
  recalled: string[];
  /** Tool names, by the model's call ids. */
  calls: Map<string, string>;
}

/** `toolName`: how the host names the read tool (`read_file` in the example loop). */
export function recallScript(toolName = 'read_file'): RecallScript {
  const calls = new Map<string, string>();
  const recalled: string[] = [];
  let n = 0;
  const handler = (req: { body: ChatRequestBody }): Scenario => {
    const messages = req.body.messages ?? [];
    if (isSummaryRequest(req.body)) {
      return { kind: 'reply', content: `## Files and Code\n${FILES.map((f) => `- ${f}: read`).join('\n')}\n## Next Step\nFind the retry limit.` };
    }
    const last = messages[messages.length - 1];
    if (last?.role === 'tool' && calls.get((last as { tool_call_id: string }).tool_call_id) === 'recall') {
      const answer = text(last);
      recalled.push(answer);
      return { kind: 'reply', content: answer.includes(NEEDLE) ? `Found it: ${NEEDLE}` : 'Recall did not bring the line back.' };
    }
    const checkpointed = messages.some((m) => m.role === 'user' && text(m).includes('<compacted-summary>'));
    const read = messages.filter((m) => m.role === 'tool').length;
    if (checkpointed && !text(messages.find((m) => m.role === 'user' && text(m).includes('<compacted-summary>'))).includes(NEEDLE) && n >= FILES.length) {
      const id = `call_recall_${n++}`;
      calls.set(id, 'recall');
      return { kind: 'reply', toolCalls: [{ id, name: 'recall', arguments: JSON.stringify({ path: FILES[0] }) }] };
    }
    if (n < FILES.length) {
      const id = `call_${n}`;
      calls.set(id, toolName);
      return { kind: 'reply', toolCalls: [{ id, name: toolName, arguments: JSON.stringify({ path: FILES[n++] }) }] };
    }
    return { kind: 'reply', content: `Read ${read} results; no checkpoint to recall from.` };
  };
  return { handler, recalled, calls };
}
