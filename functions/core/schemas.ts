/**
 * The chat-completions request body. Accepts every field and message shape of OpenAI's published
 * request schema (test/contract/schemas/), plus what OpenAI-compatible clients echo back from
 * upstreams (`reasoning`, `reasoning_details`, `annotations`, `parsed`, `tool_calls[].index`,
 * `cache_control` on content parts), and unknown top-level fields (OpenRouter's `provider`, vLLM's
 * `top_k`...), which forwarding.ts forwards or drops per target. Types are checked where they matter
 * to the gateway: model, messages, stream, sampling ranges, output caps, tools and tool_choice.
 *
 * A bad body is a 400 in OpenAI's shape that names the field path and the kind of problem: a missing
 * parameter, a wrong type, a value out of range, or an unknown value.
 */
import * as z from 'zod';
import { BadRequestError } from './errors.js';
import { formatPath, show, toBadRequest } from './request-errors.js';
import { TIER_IDS } from './tier-ids.js';

/** Bounds on what one request may carry (the body itself is bounded by the Function URL: 6 MB). */
const MAX_MESSAGES = 10_000;
const MAX_TOOLS = 512;
const MAX_PARTS = 1_000;
/** The content part types OpenAI documents: for system, developer, user and tool messages, and for assistant ones. */
const PART_TYPES = ['text', 'image_url', 'input_audio', 'file'] as const;
const ASSISTANT_PART_TYPES = ['text', 'refusal'] as const;

/**
 * The request schema, built on first use, not at import: an instance's init does not pay for it
 * (building it with upstream-reply.ts's schemas took about 9 ms, Node 22, the two modules' import
 * after zod's and the tier schemas', median of 9 processes); its first request does.
 */
function buildChatRequestSchema() {
  const text = z.string();
  /**
   * A content part: its `type` must be one the role takes (OpenAI's documented parts: `refusal` only
   * on assistant messages, which take no media) and the field that type needs is checked; anything
   * else rides along.
   */
  const partSchema = (types: readonly string[]) =>
    z.looseObject({ type: z.string() }).superRefine((part, ctx) => {
      if (!types.includes(part.type)) {
        ctx.addIssue({ code: 'invalid_value', values: [...types], input: part.type, path: ['type'] });
        return;
      }
      const need = (field: string, check: (v: unknown) => boolean, expected: string) => {
        const value = (part as Record<string, unknown>)[field];
        if (!check(value))
          ctx.addIssue({
            code: 'invalid_type',
            expected: expected as 'string',
            input: value,
            path: [field],
            message: `expected ${expected}`,
          });
      };
      const isObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);
      if (part.type === 'text') need('text', (v) => typeof v === 'string', 'string');
      else if (part.type === 'refusal') need('refusal', (v) => typeof v === 'string', 'string');
      else if (part.type === 'image_url') need('image_url', isObject, 'object');
      else if (part.type === 'input_audio') need('input_audio', isObject, 'object');
      else if (part.type === 'file') need('file', isObject, 'object');
    });
  const contentOf = (types: readonly string[]) => z.union([text, z.array(partSchema(types)).max(MAX_PARTS)]);
  const ContentSchema = contentOf(PART_TYPES);
  const AssistantContentSchema = contentOf(ASSISTANT_PART_TYPES);

  const ToolCallSchema = z.looseObject({
    id: z.string(),
    type: z.enum(['function', 'custom']).optional(),
    function: z.looseObject({ name: z.string(), arguments: z.string() }).optional(),
    custom: z.looseObject({ name: z.string(), input: z.string() }).optional(),
  });

  const name = z.string().optional();
  const MessageSchema = z.discriminatedUnion(
    'role',
    [
      z.looseObject({ role: z.literal('system'), content: ContentSchema, name }),
      z.looseObject({ role: z.literal('developer'), content: ContentSchema, name }),
      z.looseObject({ role: z.literal('user'), content: ContentSchema, name }),
      z
        .looseObject({
          role: z.literal('assistant'),
          content: z.union([AssistantContentSchema, z.null()]).optional(),
          refusal: z.string().nullable().optional(),
          tool_calls: z.array(ToolCallSchema).nullable().optional(),
          function_call: z.looseObject({ name: z.string(), arguments: z.string() }).nullable().optional(),
          name,
        })
        .refine(
          (m) =>
            (m.content !== undefined && m.content !== null) ||
            (m.tool_calls?.length ?? 0) > 0 ||
            Boolean(m.function_call) ||
            (m as { audio?: unknown }).audio != null ||
            typeof m.refusal === 'string',
          {
            message: 'an assistant message needs content, tool_calls, function_call, audio or refusal',
            path: ['content'],
          },
        ),
      z.looseObject({ role: z.literal('tool'), content: ContentSchema, tool_call_id: z.string(), name }),
      z.looseObject({ role: z.literal('function'), content: z.string().nullable(), name: z.string() }),
    ],
    { error: () => 'role must be one of system, developer, user, assistant, tool, function' },
  );

  const FunctionToolSchema = z.looseObject({
    type: z.literal('function'),
    function: z.looseObject({
      name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'a tool name of 1 to 64 letters, digits, _ or -'),
      description: z.string().optional(),
      parameters: z.record(z.string(), z.unknown()).optional(),
      strict: z.boolean().nullable().optional(),
    }),
  });
  const CustomToolSchema = z.looseObject({
    type: z.literal('custom'),
    custom: z.looseObject({ name: z.string(), description: z.string().optional() }),
  });
  const ToolSchema = z.discriminatedUnion('type', [FunctionToolSchema, CustomToolSchema], {
    error: () => 'a tool type of function or custom',
  });

  const ToolChoiceSchema = z.union([
    z.enum(['none', 'auto', 'required']),
    z.looseObject({ type: z.literal('function'), function: z.looseObject({ name: z.string() }) }),
    z.looseObject({ type: z.literal('custom'), custom: z.looseObject({ name: z.string() }) }),
    z.looseObject({
      type: z.literal('allowed_tools'),
      allowed_tools: z.looseObject({
        mode: z.enum(['auto', 'required']),
        tools: z.array(z.record(z.string(), z.unknown())),
      }),
    }),
  ]);

  const positiveInt = z.int().min(1);
  const penalty = z.number().min(-2).max(2);
  const object = z.record(z.string(), z.unknown());

  return z
    .looseObject({
      model: z.enum(TIER_IDS),
      messages: z.array(MessageSchema).min(1).max(MAX_MESSAGES),
      stream: z.boolean().nullable().optional(),
      stream_options: z
        .looseObject({ include_usage: z.boolean().optional(), include_obfuscation: z.boolean().optional() })
        .nullable()
        .optional(),
      temperature: z.number().min(0).max(2).nullable().optional(),
      top_p: z.number().min(0).max(1).nullable().optional(),
      max_tokens: positiveInt.nullable().optional(),
      max_completion_tokens: positiveInt.nullable().optional(),
      n: z.int().min(1).max(1, 'one choice per request').nullable().optional(),
      tools: z.array(ToolSchema).max(MAX_TOOLS).optional(),
      tool_choice: ToolChoiceSchema.optional(),
      parallel_tool_calls: z.boolean().optional(),
      functions: z
        .array(
          z.looseObject({
            name: z.string(),
            description: z.string().optional(),
            parameters: object.optional(),
          }),
        )
        .max(MAX_TOOLS)
        .optional(),
      function_call: z.union([z.enum(['none', 'auto']), z.looseObject({ name: z.string() })]).optional(),
      stop: z
        .union([z.string(), z.array(z.string()).min(1).max(4)])
        .nullable()
        .optional(),
      seed: z.int().nullable().optional(),
      frequency_penalty: penalty.nullable().optional(),
      presence_penalty: penalty.nullable().optional(),
      logit_bias: z.record(z.string(), z.number().min(-100).max(100)).nullable().optional(),
      logprobs: z.boolean().nullable().optional(),
      top_logprobs: z.int().min(0).max(20).nullable().optional(),
      response_format: z
        .discriminatedUnion('type', [
          z.looseObject({ type: z.literal('text') }),
          z.looseObject({ type: z.literal('json_object') }),
          z.looseObject({
            type: z.literal('json_schema'),
            json_schema: z.looseObject({ name: z.string(), schema: object.optional() }),
          }),
        ])
        .optional(),
      user: z.string().max(256).optional(),
      safety_identifier: z.string().max(64).nullable().optional(),
      prompt_cache_key: z.string().nullable().optional(),
      prompt_cache_retention: z.enum(['in_memory', '24h']).nullable().optional(),
      prompt_cache_options: object.nullable().optional(),
      metadata: z.record(z.string().max(64), z.string().max(512)).nullable().optional(),
      reasoning_effort: z
        .enum(['none', 'minimal', 'low', 'medium', 'high', 'xhigh', 'max'])
        .nullable()
        .optional(),
      verbosity: z.enum(['low', 'medium', 'high']).nullable().optional(),
      service_tier: z.string().nullable().optional(),
      modalities: z
        .array(z.enum(['text', 'audio']))
        .nullable()
        .optional(),
      audio: object.nullable().optional(),
      prediction: object.nullable().optional(),
      web_search_options: object.optional(),
      moderation: object.nullable().optional(),
      store: z.boolean().nullable().optional(),
    })
    .superRefine((request, ctx) => {
      // A named tool must be one of `tools` (OpenAI answers 400 naming tool_choice).
      const choice = request.tool_choice;
      if (choice && typeof choice === 'object' && (choice.type === 'function' || choice.type === 'custom')) {
        const wanted =
          choice.type === 'function'
            ? (choice as { function: { name: string } }).function.name
            : (choice as { custom: { name: string } }).custom.name;
        const names = (request.tools ?? []).map((tool) =>
          tool.type === 'function' ? tool.function.name : tool.custom.name,
        );
        if (!names.includes(wanted))
          ctx.addIssue({
            code: 'invalid_value',
            values: names,
            input: wanted,
            path: ['tool_choice'],
            message: `tool_choice names the tool ${show(wanted)}, which is not in tools`,
          });
      }
      const call = request.function_call;
      if (call && typeof call === 'object') {
        if (!(request.functions ?? []).some((f) => f.name === call.name))
          ctx.addIssue({
            code: 'invalid_value',
            values: [],
            input: call.name,
            path: ['function_call'],
            message: `function_call names the function ${show(call.name)}, which is not in functions`,
          });
      }
    });
}
let chatRequestSchema: ReturnType<typeof buildChatRequestSchema> | undefined;
const requestSchema = () => {
  chatRequestSchema ??= buildChatRequestSchema();
  return chatRequestSchema;
};
export type ChatRequest = z.output<ReturnType<typeof buildChatRequestSchema>>;

/**
 * The top-level fields of OpenAI's request schema that the gateway knows (the rest are "extra"), in
 * the schema's order (the order a parsed request's keys take). Spelled out so that the schema is not
 * built to read them; a test holds them equal to the schema's.
 */
export const KNOWN_REQUEST_FIELDS: ReadonlySet<string> = new Set([
  'model',
  'messages',
  'stream',
  'stream_options',
  'temperature',
  'top_p',
  'max_tokens',
  'max_completion_tokens',
  'n',
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'functions',
  'function_call',
  'stop',
  'seed',
  'frequency_penalty',
  'presence_penalty',
  'logit_bias',
  'logprobs',
  'top_logprobs',
  'response_format',
  'user',
  'safety_identifier',
  'prompt_cache_key',
  'prompt_cache_retention',
  'prompt_cache_options',
  'metadata',
  'reasoning_effort',
  'verbosity',
  'service_tier',
  'modalities',
  'audio',
  'prediction',
  'web_search_options',
  'moderation',
  'store',
]);

/** The schema's own top-level fields, in order (for the test that holds KNOWN_REQUEST_FIELDS to them). */
export const requestSchemaFields = (): string[] => Object.keys(requestSchema().shape);

/**
 * JSON nested deeper than this is a 400: fields the gateway forwards without looking inside
 * (`provider`, `reasoning_details`, tool parameter schemas) are serialised again for the upstream, and
 * JSON.stringify recurses (a 6 MB body of brackets overflows the stack: a 5xx, not the client's 400).
 */
export const MAX_JSON_DEPTH = 64;

/** Whether a (valid) JSON text nests deeper than `limit`: one pass over its characters, no allocation. */
function nestsDeeperThan(raw: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/** Walks the parsed body without recursion; throws a 400 naming where it first nests too deep. */
function checkDepth(json: unknown): void {
  interface Node {
    value: object;
    key: PropertyKey;
    parent: Node | undefined;
    depth: number;
  }
  if (typeof json !== 'object' || json === null) return;
  const stack: Node[] = [{ value: json, key: '', parent: undefined, depth: 0 }];
  for (let node = stack.pop(); node; node = stack.pop()) {
    if (node.depth >= MAX_JSON_DEPTH) {
      const path: PropertyKey[] = [];
      for (let at: Node | undefined = node; at?.parent; at = at.parent) path.unshift(at.key);
      const field = formatPath(path.slice(0, 4));
      throw new BadRequestError(
        `Invalid '${field}${path.length > 4 ? '...' : ''}': nested deeper than ${MAX_JSON_DEPTH} levels.`,
        field || null,
        'out_of_range',
      );
    }
    const parent = node;
    const visit = (value: unknown, key: PropertyKey) => {
      if (typeof value === 'object' && value !== null)
        stack.push({ value, key, parent, depth: parent.depth + 1 });
    };
    if (Array.isArray(node.value)) for (let i = 0; i < node.value.length; i++) visit(node.value[i], i);
    else for (const key in node.value) visit((node.value as Record<string, unknown>)[key], key);
  }
}

/** The request through the request schema, or the 400 naming its first problem. */
function chatRequestBySchema(json: unknown): ChatRequest {
  const result = requestSchema().safeParse(json, { reportInput: true });
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  throw issue ? toBadRequest(issue) : new BadRequestError('Invalid request body.');
}

/** Parses the raw body (a JSON string) into a ChatRequest, or throws a 400 naming the field. */
export function parseChatRequest(rawBody: string | undefined): ChatRequest {
  let json: unknown;
  try {
    json = JSON.parse(rawBody ?? '');
  } catch (cause) {
    throw new BadRequestError('The request body is not valid JSON.', null, 'invalid_json', { cause });
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw new BadRequestError('The request body must be a JSON object.', null, 'invalid_json');
  }
  if (nestsDeeperThan(rawBody ?? '', MAX_JSON_DEPTH)) checkDepth(json);
  return chatRequestBySchema(json);
}
