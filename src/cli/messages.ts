/**
 * OpenAI chat-messages JSON ⇄ Session. The import records the conversation the way an agent
 * loop would have: the system prompt as node 0, each user message opening a turn, each
 * assistant message a step (with a request header naming the model and tools), tool results
 * after their calls. Mistakes are reported by message index.
 */
import { SessionRuleError } from '../session/errors';
import type { ImageBlock, TextBlock } from '../session/events';
import type { Session } from '../session/session';
import { SessionWriter } from '../session/writer';
import { CliError } from './errors';

export interface MessagesFile {
  /** The input was a bare array (written back as one). */
  bare: boolean;
  messages: unknown[];
  tools: Record<string, unknown>[];
  model: string | undefined;
}

export function parseMessagesFile(file: string, value: unknown): MessagesFile {
  if (Array.isArray(value)) return { bare: true, messages: value, tools: [], model: undefined };
  if (typeof value === 'object' && value !== null && Array.isArray((value as { messages?: unknown }).messages)) {
    const { messages, tools, model } = value as { messages: unknown[]; tools?: unknown; model?: unknown };
    if (tools !== undefined && !Array.isArray(tools)) throw new CliError(`${file}: "tools" must be an array of tool definitions (or left out).`);
    return { bare: false, messages, tools: (tools ?? []) as Record<string, unknown>[], model: typeof model === 'string' ? model : undefined };
  }
  throw new CliError(`${file}: expected a JSON array of chat messages, or an object { "messages": [...], "tools"?: [...], "model"?: "..." }.`);
}

function textOf(content: unknown, where: string): string {
  if (typeof content === 'string') return content;
  if (content === null || content === undefined) return '';
  if (Array.isArray(content)) {
    return content
      .map((p: { type?: string; text?: unknown }) => {
        if (p?.type === 'text' && typeof p.text === 'string') return p.text;
        throw new CliError(`${where}: content parts other than text are not supported here (got ${JSON.stringify(p?.type)}).`);
      })
      .join('\n\n');
  }
  throw new CliError(`${where}: content must be a string or an array of parts.`);
}

function userBlocks(content: unknown, where: string): Array<TextBlock | ImageBlock> {
  if (typeof content === 'string') return [{ type: 'text', text: content }];
  if (!Array.isArray(content) || content.length === 0) throw new CliError(`${where}: user content must be a string or a non-empty array of parts.`);
  return content.map((p: { type?: string; text?: unknown; image_url?: { url?: unknown; detail?: unknown } }) => {
    if (p?.type === 'text' && typeof p.text === 'string') return { type: 'text', text: p.text };
    if (p?.type === 'image_url' && typeof p.image_url?.url === 'string') {
      const detail = p.image_url.detail;
      return { type: 'image', url: p.image_url.url, ...(detail === 'auto' || detail === 'low' || detail === 'high' ? { detail } : {}) };
    }
    throw new CliError(`${where}: unsupported content part ${JSON.stringify(p).slice(0, 80)}.`);
  });
}

/** Records the messages into an empty session. */
export function importChatMessages(session: Session, file: string, input: MessagesFile, route: { provider: string; model: string }): void {
  const w = new SessionWriter(session);
  const header = () => w.request({ provider: route.provider, model: route.model, tools: input.tools });
  const closeStep = (where: string) => {
    const pending = session.surface.pendingCalls();
    if (pending.length > 0) {
      throw new CliError(
        `${where}: comes before the tool results of ${pending.map((c) => `"${c}"`).join(', ')}; every tool call needs its tool message right after the assistant message.`,
      );
    }
    if (session.openStep) w.endStep();
  };
  if (input.messages.length === 0) throw new CliError(`${file}: the messages array is empty: there is nothing to compact.`);
  input.messages.forEach((raw, i) => {
    const where = `${file}: messages[${i}]`;
    if (typeof raw !== 'object' || raw === null) throw new CliError(`${where} is not an object.`);
    const m = raw as { role?: unknown; content?: unknown; tool_calls?: unknown; tool_call_id?: unknown };
    try {
      switch (m.role) {
        case 'system':
        case 'developer':
          if (i !== 0) throw new CliError(`${where}: a ${m.role} message is only supported as the first message.`);
          w.system(textOf(m.content, where));
          header();
          return;
        case 'user':
          closeStep(where);
          if (session.openTurn !== null) w.endTurn();
          w.startTurn();
          if (!session.latestHeader) header();
          w.user(userBlocks(m.content, where));
          return;
        case 'assistant': {
          closeStep(where);
          if (session.openTurn === null) w.startTurn();
          w.startStep();
          header();
          const calls = m.tool_calls === undefined || m.tool_calls === null ? [] : m.tool_calls;
          if (!Array.isArray(calls)) throw new CliError(`${where}: tool_calls must be an array.`);
          const toolCalls = calls.map((c: { id?: unknown; type?: unknown; function?: { name?: unknown; arguments?: unknown } }, k) => {
            if (typeof c?.id !== 'string' || typeof c.function?.name !== 'string' || typeof c.function.arguments !== 'string') {
              throw new CliError(`${where}: tool_calls[${k}] needs a string id, function.name and function.arguments.`);
            }
            return { id: c.id, name: c.function.name, arguments: c.function.arguments };
          });
          const text = textOf(m.content, where);
          w.assistant({ ...(text ? { text } : {}), toolCalls, model: route.model, provider: route.provider });
          return;
        }
        case 'tool':
          if (typeof m.tool_call_id !== 'string') throw new CliError(`${where}: a tool message needs a string tool_call_id.`);
          w.toolResult(m.tool_call_id, textOf(m.content, where));
          return;
        default:
          throw new CliError(`${where}: unknown role ${JSON.stringify(m.role)}; expected system, user, assistant or tool.`);
      }
    } catch (err) {
      if (err instanceof SessionRuleError) throw new CliError(`${where}: ${err.message}`, 1, { cause: err });
      throw err;
    }
  });
  const pending = session.surface.pendingCalls();
  if (pending.length > 0) {
    throw new CliError(
      `${file}: the conversation ends with tool calls that have no tool message (${pending.map((c) => `"${c}"`).join(', ')}); add their results or drop the calls.`,
    );
  }
  if (session.openStep) w.endStep();
  if (session.openTurn !== null) w.endTurn();
}
