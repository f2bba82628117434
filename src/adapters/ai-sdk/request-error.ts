/**
 * The AI SDK's `APICallError` as the engine's error classifier reads errors: `status`, the
 * provider message and the body's `error` object (where codes like `context_length_exceeded`
 * live). The classifier knows the `openai` SDK's shape; this keeps it unaware of the AI SDK.
 */
import { APICallError } from 'ai';
import { recoverErrorBody } from '../../services/overflow';

export function normaliseRequestError(err: unknown): unknown {
  if (!APICallError.isInstance(err)) return err;
  let body: unknown = err.data;
  if (body === undefined && err.responseBody) {
    try {
      body = JSON.parse(err.responseBody);
    } catch {
      body = err.responseBody;
    }
  }
  const recovered = recoverErrorBody(body);
  const error = recovered && typeof recovered === 'object' && 'error' in recovered ? recovered.error : recovered;
  return { name: err.name, message: err.message, ...(err.statusCode !== undefined ? { status: err.statusCode } : {}), error, cause: err };
}
