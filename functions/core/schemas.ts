import * as z from 'zod';
import { BadRequestError } from './errors.js';
import { TIER_IDS } from './tiers.js';

/**
 * The chat-completions request body. Accepts the message shapes OpenAI clients really send and the
 * sampling fields upstreams understand; anything else is a 400 naming the offending field.
 */
const TextPartSchema = z.strictObject({ type: z.literal('text'), text: z.string() });
const UserPartSchema = z.discriminatedUnion('type', [
  TextPartSchema,
  z.strictObject({
    type: z.literal('image_url'),
    image_url: z.strictObject({ url: z.string(), detail: z.enum(['auto', 'low', 'high']).optional() }),
  }),
  z.strictObject({
    type: z.literal('input_audio'),
    input_audio: z.strictObject({ data: z.string(), format: z.enum(['wav', 'mp3']) }),
  }),
  z.strictObject({
    type: z.literal('file'),
    file: z.strictObject({
      file_data: z.string().optional(),
      file_id: z.string().optional(),
      filename: z.string().optional(),
    }),
  }),
]);
const AssistantPartSchema = z.discriminatedUnion('type', [
  TextPartSchema,
  z.strictObject({ type: z.literal('refusal'), refusal: z.string() }),
]);

const ToolCallSchema = z.strictObject({
  id: z.string(),
  type: z.literal('function'),
  function: z.strictObject({ name: z.string(), arguments: z.string() }),
});

const name = z.string().optional();
const MessageSchema = z.discriminatedUnion(
  'role',
  [
    z.strictObject({
      role: z.literal('system'),
      content: z.union([z.string(), z.array(TextPartSchema)]),
      name,
    }),
    z.strictObject({
      role: z.literal('developer'),
      content: z.union([z.string(), z.array(TextPartSchema)]),
      name,
    }),
    z.strictObject({
      role: z.literal('user'),
      content: z.union([z.string(), z.array(UserPartSchema)]),
      name,
    }),
    z
      .strictObject({
        role: z.literal('assistant'),
        content: z.union([z.string(), z.array(AssistantPartSchema), z.null()]).optional(),
        refusal: z.string().nullable().optional(),
        tool_calls: z.array(ToolCallSchema).optional(),
        audio: z.strictObject({ id: z.string() }).nullable().optional(),
        function_call: z.strictObject({ name: z.string(), arguments: z.string() }).nullable().optional(),
        name,
      })
      .refine(
        (m) =>
          (m.content !== undefined && m.content !== null) ||
          (m.tool_calls?.length ?? 0) > 0 ||
          m.function_call,
        {
          message: 'an assistant message needs content or tool_calls',
          path: ['content'],
        },
      ),
    z.strictObject({
      role: z.literal('tool'),
      content: z.union([z.string(), z.array(TextPartSchema)]),
      tool_call_id: z.string(),
    }),
  ],
  { error: () => 'role must be one of system, developer, user, assistant, tool' },
);

const ToolSchema = z.strictObject({
  type: z.literal('function'),
  function: z.strictObject({
    name: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'a tool name of 1 to 64 letters, digits, _ or -'),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().nullable().optional(),
  }),
});

const ToolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.strictObject({ type: z.literal('function'), function: z.strictObject({ name: z.string() }) }),
]);

const positiveInt = z.number().int().positive();
const penalty = z.number().min(-2).max(2);

export const ChatRequestSchema = z.strictObject({
  model: z.enum(TIER_IDS, { error: () => `model must be one of ${TIER_IDS.join(', ')}` }),
  messages: z
    .array(MessageSchema, { error: () => 'messages is required: an array of message objects' })
    .min(1, 'messages must not be empty'),
  stream: z.boolean().nullable().optional(),
  stream_options: z.strictObject({ include_usage: z.boolean().optional() }).nullable().optional(),
  temperature: z
    .number()
    .min(0, 'temperature must be between 0 and 2')
    .max(2, 'temperature must be between 0 and 2')
    .nullable()
    .optional(),
  max_tokens: positiveInt.nullable().optional(),
  max_completion_tokens: positiveInt.nullable().optional(),
  tools: z.array(ToolSchema).optional(),
  tool_choice: ToolChoiceSchema.optional(),
  parallel_tool_calls: z.boolean().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  stop: z
    .union([z.string(), z.array(z.string()).max(4)])
    .nullable()
    .optional(),
  seed: z.number().int().nullable().optional(),
  frequency_penalty: penalty.nullable().optional(),
  presence_penalty: penalty.nullable().optional(),
  logit_bias: z.record(z.string(), z.number().min(-100).max(100)).nullable().optional(),
  logprobs: z.boolean().nullable().optional(),
  top_logprobs: z.number().int().min(0).max(20).nullable().optional(),
  response_format: z
    .discriminatedUnion('type', [
      z.strictObject({ type: z.literal('text') }),
      z.strictObject({ type: z.literal('json_object') }),
      z.strictObject({
        type: z.literal('json_schema'),
        json_schema: z.strictObject({
          name: z.string(),
          description: z.string().optional(),
          schema: z.record(z.string(), z.unknown()).optional(),
          strict: z.boolean().nullable().optional(),
        }),
      }),
    ])
    .optional(),
  n: z
    .literal(1, { error: () => 'n must be 1: one choice per request' })
    .nullable()
    .optional(),
  user: z.string().optional(),
  metadata: z.record(z.string(), z.string()).nullable().optional(),
  reasoning_effort: z.enum(['minimal', 'low', 'medium', 'high']).nullable().optional(),
  store: z.boolean().nullable().optional(),
});
export type ChatRequest = z.output<typeof ChatRequestSchema>;

/** `messages.1.tool_call_id` -> `messages[1].tool_call_id` */
function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (out, key) => (typeof key === 'number' ? `${out}[${key}]` : out ? `${out}.${String(key)}` : String(key)),
    '',
  );
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
  const result = ChatRequestSchema.safeParse(json);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (!issue) throw new BadRequestError('Invalid request body.');
  if (issue.code === 'unrecognized_keys') {
    const field = formatPath([...issue.path, issue.keys[0] ?? '']);
    throw new BadRequestError(`Unrecognized request argument supplied: ${field}`, field, 'unknown_parameter');
  }
  const field = formatPath(issue.path);
  const missing = issue.code === 'invalid_type' && issue.input === undefined;
  if (missing)
    throw new BadRequestError(`Missing required parameter: ${field}`, field, 'missing_required_parameter');
  throw new BadRequestError(
    `Invalid value for ${field || 'body'}: ${issue.message}`,
    field || null,
    'invalid_value',
  );
}
