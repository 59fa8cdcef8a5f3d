// Anthropic's error shape for POST /v1/messages. Its SDKs choose the
// exception class by status and read `error.type` and `error.message`, so a
// refusal llmgw makes on the messages routes is written in this shape (the
// dialect's errorBody and errorShape), and an engine's error in OpenAI's
// shape is rewritten in it by the relay (toAnthropicError).

/** Anthropic's `error.type` for an HTTP status. */
export function anthropicErrorType(status: number): string {
  if (status === 401) return 'authentication_error';
  if (status === 403) return 'permission_error';
  if (status === 404) return 'not_found_error';
  if (status === 413) return 'request_too_large';
  if (status === 429) return 'rate_limit_error';
  if (status === 529 || status === 503) return 'overloaded_error';
  if (status >= 500) return 'api_error';
  return 'invalid_request_error';
}

export function anthropicErrorBody(message: string, status: number): string {
  return JSON.stringify({ type: 'error', error: { type: anthropicErrorType(status), message } });
}

/**
 * An error body in OpenAI's shape (the router's, or an engine's) rewritten
 * in Anthropic's, keeping its message; a body that is not one is described
 * by its status instead, so the client still gets Anthropic's shape.
 */
export function toAnthropicError(body: string, status: number): string {
  let message = `the engine answered ${status}`;
  try {
    const parsed = JSON.parse(body) as { error?: { message?: unknown } | string; message?: unknown; detail?: unknown };
    if (typeof parsed.error === 'object' && parsed.error !== null && typeof parsed.error.message === 'string')
      message = parsed.error.message;
    else if (typeof parsed.error === 'string') message = parsed.error;
    else if (typeof parsed.message === 'string') message = parsed.message;
    else if (typeof parsed.detail === 'string') message = parsed.detail;
  } catch {
    // Not JSON: the status says enough.
  }
  return anthropicErrorBody(message, status);
}
