/**
 * Builds the request a Summarizer gets for a span: the system prompt and the context before
 * the span, the span's messages and events, the target model and its output cap.
 */
import type { SurfaceEvent } from '../session/events';
import { modelInfoFor, policyFor } from './config';
import type { ServiceDeps } from './deps';
import type { RangeSelection } from './range';
import { routeBudget, summaryTarget } from './route';
import type { SummaryRequest } from './summarizer';
import { getTokenizer } from './tokenizer';

/** Summary output cap when neither the config nor a resolvable budget gives one. */
export const FALLBACK_SUMMARY_MAX_TOKENS = 8192;

export function buildSummaryRequest(deps: Pick<ServiceDeps, 'session' | 'config' | 'tokenizerName'>, range: RangeSelection, focus: string | undefined): SummaryRequest {
  const { session, config } = deps;
  const target = summaryTarget(deps);
  const s = session.surface;
  const system = range.contextPos === 1 ? session.messageAt(0) : undefined;
  const context = [];
  for (let p = range.contextPos; p < range.startPos; p++) context.push(session.messageAt(p));
  const messages = [];
  const events: SurfaceEvent[] = [];
  for (let p = range.startPos; p <= range.endPos; p++) {
    messages.push(session.messageAt(p));
    events.push(session.event(s.seqAt(p)) as SurfaceEvent);
  }
  const targetInfo = modelInfoFor(config, target.provider, target.model);
  let maxTokens: number;
  try {
    maxTokens = routeBudget(deps).maxTokens;
  } catch {
    // No resolvable budget (overflow recovery without capacity): an explicit cap, else a modest one.
    maxTokens = policyFor(config, target.provider, target.model).maxTokens ?? FALLBACK_SUMMARY_MAX_TOKENS;
  }
  // Never ask for more output than the summarizer model gives: providers reject such requests.
  if (targetInfo?.maxOutputTokens !== undefined) maxTokens = Math.min(maxTokens, targetInfo.maxOutputTokens);
  const targetTokenizer = getTokenizer(deps.tokenizerName(target.provider, target.model));
  const request: SummaryRequest = {
    system,
    tools: session.latestHeader?.data.tools ?? [],
    context,
    messages,
    events,
    target,
    maxTokens,
    countTokens: (text) => targetTokenizer.count(text),
  };
  if (focus !== undefined) request.focus = focus;
  if (targetInfo?.contextWindow !== undefined) request.contextWindow = targetInfo.contextWindow;
  if (targetInfo?.outputCapField !== undefined) request.outputCapField = targetInfo.outputCapField;
  return request;
}
