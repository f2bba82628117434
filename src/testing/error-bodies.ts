/**
 * Real provider error bodies for the local server's `status` scenarios: context overflow in
 * each provider's wording and envelope, and errors that must NOT be read as overflow.
 */

export type ProviderName =
  | 'openai'
  | 'openai-context-window'
  | 'deepseek'
  | 'vllm'
  | 'vllm-input-tokens'
  | 'llama.cpp'
  | 'ollama'
  | 'openrouter'
  | 'groq'
  | 'cerebras'
  | 'mistral'
  | 'gemini'
  | 'anthropic';

export interface ProviderErrorBody {
  status: number;
  body: unknown;
}

/**
 * Context-overflow responses in each provider's real wording and envelope. The numbers are
 * the ones in the cited reports. Use as `server.enqueue({ kind: 'status', ...OVERFLOW_BODIES.vllm })`.
 */
export const OVERFLOW_BODIES: Readonly<Record<ProviderName, ProviderErrorBody>> = {
  // Source: AsyncFuncAI/deepwiki-open#144 and webtimemachine/wtm2#579 (pasted API bodies);
  // numbers from the xcompact notes (verified with openai 6.49.0).
  openai: {
    status: 400,
    body: {
      error: {
        message:
          "This model's maximum context length is 128000 tokens. However, your messages resulted in 130532 tokens. Please reduce the length of the messages.",
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    },
  },
  // OpenAI's newer wording (no numbers). Source: quoted in the overflow catalogs of
  // earendil-works/pi (packages/ai overflow.ts) and its ports; not seen in an issue body here,
  // so the envelope fields other than `code` are assumed.
  'openai-context-window': {
    status: 400,
    body: {
      error: {
        message: 'Your input exceeds the context window of this model. Please adjust your input and try again.',
        type: 'invalid_request_error',
        param: 'input',
        code: 'context_length_exceeded',
      },
    },
  },
  // Source: evalstate/fast-agent#621 (deepseek-chat, full body pasted). Note `code` is
  // 'invalid_request_error', not 'context_length_exceeded': only the text identifies it.
  deepseek: {
    status: 400,
    body: {
      error: {
        message:
          "This model's maximum context length is 131072 tokens. However, you requested 131134 tokens (122942 in the messages, 8192 in the completion). Please reduce the length of the messages or completion.",
        type: 'invalid_request_error',
        param: null,
        code: 'invalid_request_error',
      },
    },
  },
  // vLLM ≤ ~0.10 answers with a FLAT body (no `error` wrapper): ErrorResponse{object, message,
  // type, param, code} and the wording of OpenAIServing._validate_input, both read in
  // vllm-project/vllm vllm/entrypoints/openai/serving_engine.py; the same body is pasted in
  // vllm-project/vllm#20409 and elotl/GenAI-infra-stack#62. openai 6 reports it as
  // "400 status code (no body)" unless the body is recovered (see withErrorBodyRecovery).
  vllm: {
    status: 400,
    body: {
      object: 'error',
      message:
        "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
      type: 'BadRequestError',
      param: null,
      code: 400,
    },
  },
  // Newer vLLM: the renderer's check ("However, your request has N input tokens"), and the
  // ErrorResponse is now wrapped as {error: ErrorInfo} (vLLM protocol change quoted in a
  // guidellm issue; body pasted in public test fixtures). Wording read in vLLM's
  // entrypoints/renderer.py (create_tokens_prompt).
  'vllm-input-tokens': {
    status: 400,
    body: {
      error: {
        message:
          "This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens. Please reduce the length of the input messages.",
        type: 'BadRequestError',
        param: null,
        code: 400,
      },
    },
  },
  // llama.cpp llama-server (tools/server/server-context.cpp): type exceed_context_size_error
  // with n_prompt_tokens / n_ctx. Verified against a locally built llama-server (xcompact
  // notes); the same body shape is quoted in several public projects.
  'llama.cpp': {
    status: 400,
    body: {
      error: {
        code: 400,
        message: 'request (2028 tokens) exceeds the available context size (512 tokens), try increasing it',
        type: 'exceed_context_size_error',
        n_prompt_tokens: 2028,
        n_ctx: 512,
      },
    },
  },
  // Ollama's OpenAI-compatible endpoint wraps errors as {error:{message,type,param,code}}
  // with type invalid_request_error for 400 (ollama/ollama openai/openai.go, NewError).
  // The message is the one users report from Ollama ("Ollama API error 400 … prompt too long;
  // exceeded max context length by 4 tokens", also with a "(ref: <uuid>)" suffix from
  // ollama.com). NOT confirmed in Ollama's source: the local runner instead TRUNCATES an
  // oversized prompt silently (runner/ollamarunner/runner.go, "truncating input prompt"),
  // which only isSilentOverflow-style checks can see.
  ollama: {
    status: 400,
    body: {
      error: {
        message: 'prompt too long; exceeded max context length by 4 tokens',
        type: 'invalid_request_error',
        param: null,
        code: null,
      },
    },
  },
  // Source: OpenHands/OpenHands#8149 and #9937, refly-ai/refly#1177 (wording); newer
  // reports (RooCodeInc/Roo-Code#11998) add "of tool input" and mention the
  // context-compression plugin instead of middle-out. Envelope {error:{message, code}} as
  // quoted in public test fixtures; the `metadata` field OpenRouter may add is omitted.
  openrouter: {
    status: 400,
    body: {
      error: {
        message:
          'This endpoint\'s maximum context length is 40960 tokens. However, you requested about 42988 tokens (38892 of text input, 4096 in the output). Please reduce the length of either one, or use the "middle-out" transform to compress your prompt automatically.',
        code: 400,
      },
    },
  },
  // Source: OpenHands/OpenHands#1902, letta-ai/letta#1963, ScrapeGraphAI/Scrapegraph-ai#411
  // (same body each time; no token numbers).
  groq: {
    status: 400,
    body: {
      error: {
        message: 'Please reduce the length of the messages or completion.',
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    },
  },
  // Source: cline/cline#5140 (message text only: "400 Please reduce the length of the messages
  // or completion. Current length is 42328 while limit is 40000"); envelope assumed OpenAI-style.
  cerebras: {
    status: 400,
    body: {
      error: {
        message: 'Please reduce the length of the messages or completion. Current length is 42328 while limit is 40000',
        type: 'invalid_request_error',
        param: 'messages',
        code: 'context_length_exceeded',
      },
    },
  },
  // Mistral also answers with a FLAT body. Wording and envelope from a mistralai SDK error
  // pasted in public code ("Status 400. Body: {"object":"error","message":"Prompt contains
  // 159202 tokens and 0 draft tokens, too large for model with 131072 maximum context
  // length","type":"invalid_request_invalid_args","param":null,"code":"3051",...}") and test
  // fixtures citing https://docs.mistral.ai/resources/known-limitations. Not confirmed from
  // Mistral's own documentation here.
  mistral: {
    status: 400,
    body: {
      object: 'error',
      message: 'Prompt contains 40687 tokens and 0 draft tokens, too large for model with 32768 maximum context length',
      type: 'invalid_request_invalid_args',
      param: null,
      code: '3051',
    },
  },
  // Gemini's OpenAI-compatible endpoint answers with a JSON ARRAY of Google error objects
  // (seen as "Error code: 400 - [{'error': {'code': 400, 'message': ..., 'status':
  // 'INVALID_ARGUMENT'}}]" from the Python openai SDK, Simpleyyt/ai-manus#101 and a public
  // benchmark log for gemini-3.1-flash-lite); wording from google-gemini/gemini-cli#4692,
  // #6678, #12098. openai 6 loses it too ("400 status code (no body)").
  gemini: {
    status: 400,
    body: [
      {
        error: {
          code: 400,
          message: 'The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).',
          status: 'INVALID_ARGUMENT',
        },
      },
    ],
  },
  // Anthropic (and gateways passing its errors through). Source: earendil-works/pi#102 and
  // boldsoftware/exe.dev#62 (full bodies); stackblitz/bolt.new#1748 (wording).
  anthropic: {
    status: 400,
    body: {
      type: 'error',
      error: {
        type: 'invalid_request_error',
        message: 'prompt is too long: 208310 tokens > 200000 maximum',
      },
      request_id: 'req_011CVjxiYzEFcAQC4Fk87zw2',
    },
  },
};

/** Error responses that are NOT context overflow, in real wordings, for negative tests and demos. */
export const OTHER_ERROR_BODIES = {
  // OpenAI TPM rate limit: mentions tokens and "Requested", must stay a rate limit.
  rateLimit: {
    status: 429,
    body: {
      error: {
        message:
          'Rate limit reached for gpt-4o in organization org-local on tokens per min (TPM): Limit 30000, Used 29899, Requested 1151. Please try again in 2.1s. Visit https://platform.openai.com/account/rate-limits to learn more.',
        type: 'tokens',
        param: null,
        code: 'rate_limit_exceeded',
      },
    },
  },
  // Groq answers a request larger than the tier's tokens-per-minute with 413 (not 429).
  // Source: assafelovic/gpt-researcher#985, bklieger-groq/NotebookLlama-Groq#1.
  groqTokensPerMinute: {
    status: 413,
    body: {
      error: {
        message:
          'Request too large for model `llama-3.1-70b-versatile` in organization `org_local` on tokens per minute (TPM): Limit 6000, Requested 14368, please reduce your message size and try again. Visit https://console.groq.com/docs/rate-limits for more information.',
        type: 'tokens',
        code: 'rate_limit_exceeded',
      },
    },
  },
  serverError: {
    status: 500,
    body: {
      error: {
        message: 'The server had an error while processing your request. Sorry about that!',
        type: 'server_error',
        param: null,
        code: null,
      },
    },
  },
  invalidToolCalls: {
    status: 400,
    body: {
      error: {
        message: "Invalid 'messages[1].tool_calls': empty array. Expected an array with minimum length 1, but got an empty array instead.",
        type: 'invalid_request_error',
        param: 'messages[1].tool_calls',
        code: 'empty_array',
      },
    },
  },
  /**
   * llama.cpp's 500 for a request whose history holds a tool call with arguments that are not
   * JSON (an earlier reply cut inside the call, answered 200 with `arguments: "{"`): the chat
   * template parses them and fails, on every request that carries the call (llama-server
   * --jinja; docs/local-models.md#replies-cut-inside-a-tool-call: not the answer to the cut reply itself, as docs/local-models.md#replies-cut-inside-a-tool-call had it).
   */
  llamaBrokenToolHistory: {
    status: 500,
    body: {
      error: {
        code: 500,
        message:
          "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error at line 1, column 27: syntax error while parsing object - unexpected end of input; expected '}'",
        type: 'server_error',
      },
    },
  },
  invalidContextValue: {
    status: 400,
    body: {
      error: {
        message: "Invalid value for 'context': expected an object, but got a string instead.",
        type: 'invalid_request_error',
        param: 'context',
        code: 'invalid_value',
      },
    },
  },
} as const satisfies Record<string, ProviderErrorBody>;
