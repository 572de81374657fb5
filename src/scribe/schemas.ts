// JSON Schemas of the scribe API's answers (docs/api.md "Scribe"): Fastify serialises the responses with
// them, so a field can neither go missing nor leak in by accident.

const nullableString = { type: ['string', 'null'] } as const;

export const submittedSchema = {
  type: 'object',
  required: ['scribe_id', 'status', 'submitted_at'],
  properties: {
    scribe_id: { type: 'integer' },
    status: { type: 'string', enum: ['IN_PROGRESS', 'COMPLETED', 'FAILED'] },
    submitted_at: { type: 'string' },
  },
} as const;

const noteSchema = {
  type: 'object',
  required: ['template_id', 'template_name', 'sections', 'document_reference'],
  properties: {
    template_id: { type: 'integer' },
    template_name: { type: 'string' },
    sections: {
      type: 'array',
      items: {
        type: 'object',
        required: ['title', 'text'],
        properties: { title: { type: 'string' }, text: { type: 'string' } },
      },
    },
    document_reference: { type: 'string' },
  },
} as const;

export const recordSchema = {
  type: 'object',
  required: [
    'scribe_id',
    'status',
    'submitted_at',
    'completed_at',
    'patient_name',
    'date_of_service',
    'additional_context',
    'patient',
    'encounter',
    'template_ids',
    'transcripts',
    'notes',
    'error',
  ],
  properties: {
    scribe_id: { type: 'integer' },
    status: { type: 'string', enum: ['IN_PROGRESS', 'COMPLETED', 'FAILED'] },
    submitted_at: { type: 'string' },
    completed_at: nullableString,
    patient_name: nullableString,
    date_of_service: nullableString,
    additional_context: { anyOf: [{ type: 'object', additionalProperties: true }, { type: 'null' }] },
    patient: nullableString,
    encounter: nullableString,
    template_ids: { type: 'array', items: { type: 'integer' } },
    transcripts: { type: 'array', items: { type: 'string' } },
    notes: { type: 'array', items: noteSchema },
    error: nullableString,
  },
} as const;

export const recordListSchema = {
  type: 'object',
  required: ['items', 'next_cursor'],
  properties: {
    items: { type: 'array', items: recordSchema },
    next_cursor: nullableString,
  },
} as const;

export const templateSchema = {
  type: 'object',
  required: ['id', 'name', 'description', 'document_type', 'sections', 'builtin', 'updated_at'],
  properties: {
    id: { type: 'integer' },
    name: { type: 'string' },
    description: { type: 'string' },
    document_type: {
      type: 'object',
      required: ['system', 'code', 'display'],
      properties: { system: { type: 'string' }, code: { type: 'string' }, display: { type: 'string' } },
    },
    sections: {
      type: 'array',
      items: {
        type: 'object',
        required: ['title', 'guidance'],
        properties: { title: { type: 'string' }, guidance: { type: 'string' } },
      },
    },
    builtin: { type: 'boolean' },
    updated_at: nullableString,
  },
} as const;

export const templateListSchema = {
  type: 'object',
  required: ['items'],
  properties: { items: { type: 'array', items: templateSchema } },
} as const;
