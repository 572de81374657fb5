// Notes from an OpenAI-compatible chat-completions endpoint (OpenAI, Azure OpenAI through a gateway, vLLM,
// Ollama, llama.cpp server, LiteLLM, ...): POST {AMBIENT_LLM_URL}/chat/completions with the template and the
// transcripts; the model answers {"sections": [{"title", "text"}]}. Answers in Markdown (a heading per
// section) are read too, since not every model keeps to JSON. Timeouts and retries: http.ts.
import type { EngineConfig } from '../../config.js';
import { EMPTY_SECTION_TEXT } from './builtin/generator.js';
import { EngineError } from './engine.js';
import type { NoteGenerator, NoteRequest, NoteSection } from './engine.js';
import { callEngine } from './http.js';

export const SYSTEM_PROMPT = [
  'You are a clinical documentation assistant. You write a clinical note from the transcript of a visit',
  'between a clinician and a patient, following the template you are given.',
  'Use only what the transcript and the given context state: never invent symptoms, findings, results,',
  `diagnoses, medications or plans. When nothing in the transcript belongs in a section, write "${EMPTY_SECTION_TEXT}"`,
  'Write in the concise style of a clinical note; say who reported what where it matters (patient, companion,',
  'clinician).',
  'Answer with one JSON object and nothing else, of the form',
  '{"sections": [{"title": "<section title>", "text": "<section text>"}]},',
  'with exactly the sections of the template, in its order, with their titles exactly as given.',
].join('\n');

/** The user message: the template with its guidance, the visit's facts and the transcripts. */
export function userPrompt(request: NoteRequest): string {
  const { template } = request;
  const lines = [`Template: ${template.name}`, 'Sections:'];
  template.sections.forEach((section, i) => {
    lines.push(`${i + 1}. ${section.title}${section.guidance ? `: ${section.guidance}` : ''}`);
  });
  lines.push('');
  if (request.patientName) lines.push(`Patient name: ${request.patientName}`);
  if (request.dateOfService) lines.push(`Date of service: ${request.dateOfService}`);
  if (request.additionalContext && Object.keys(request.additionalContext).length > 0) {
    lines.push(`Additional context (JSON): ${JSON.stringify(request.additionalContext)}`);
  }
  request.transcripts.forEach((transcript, i) => {
    lines.push('', request.transcripts.length === 1 ? 'Transcript:' : `Transcript ${i + 1}:`, transcript.trim());
  });
  return lines.join('\n');
}

const normalizeTitle = (title: string): string =>
  title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, ' ')
    .trim();

/** {"sections": [...]} anywhere in the answer (inside a ```json fence, after a sentence, ...). */
function jsonSections(content: string): Map<string, string> | undefined {
  const start = content.indexOf('{');
  const end = content.lastIndexOf('}');
  if (start < 0 || end <= start) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(content.slice(start, end + 1));
  } catch {
    return undefined;
  }
  const sections = (parsed as { sections?: unknown })?.sections;
  const found = new Map<string, string>();
  if (Array.isArray(sections)) {
    for (const section of sections) {
      const { title, text } = (section ?? {}) as { title?: unknown; text?: unknown };
      if (typeof title === 'string' && typeof text === 'string') found.set(normalizeTitle(title), text.trim());
    }
  } else if (parsed && typeof parsed === 'object') {
    // {"Subjective": "...", "Objective": "..."}: a shape some models prefer.
    for (const [title, text] of Object.entries(parsed as Record<string, unknown>)) {
      if (typeof text === 'string') found.set(normalizeTitle(title), text.trim());
    }
  }
  return found.size > 0 ? found : undefined;
}

/** A Markdown answer: each template title on a line of its own (`## Plan`, `**Plan:**`, `PLAN`). */
function markdownSections(content: string, titles: readonly string[]): Map<string, string> {
  const wanted = new Set(titles.map(normalizeTitle));
  const found = new Map<string, string>();
  let current: string | undefined;
  let buffer: string[] = [];
  const flush = () => {
    if (current !== undefined) found.set(current, buffer.join('\n').trim());
  };
  for (const line of content.split(/\r?\n/)) {
    const heading = /^\s*(?:#{1,6}\s*)?(?:\*\*|__)?([^*_#:]{1,100}?)(?:\*\*|__)?\s*:?\s*(?:\*\*|__)?\s*$/.exec(line);
    const key = heading ? normalizeTitle(heading[1]) : undefined;
    if (key !== undefined && wanted.has(key)) {
      flush();
      current = key;
      buffer = [];
    } else if (current !== undefined) {
      buffer.push(line);
    }
  }
  flush();
  return found;
}

/** The template's sections, in its order, from the model's answer. */
export function sectionsFromAnswer(content: string, titles: readonly string[]): NoteSection[] {
  const found = jsonSections(content) ?? markdownSections(content, titles);
  const sections = titles.map((title) => ({ title, text: found.get(normalizeTitle(title)) }));
  if (sections.every((s) => s.text === undefined)) {
    throw new EngineError("note engine: the model's answer holds none of the template's sections", true);
  }
  return sections.map((s) => ({ title: s.title, text: s.text || EMPTY_SECTION_TEXT }));
}

export class ChatCompletionsGenerator implements NoteGenerator {
  readonly name: string;

  constructor(
    private readonly engine: EngineConfig,
    private readonly options: { retryBaseMs?: number } = {},
  ) {
    this.name = `llm:${engine.model}`;
  }

  async generate(request: NoteRequest, signal: AbortSignal): Promise<NoteSection[]> {
    const answer = await callEngine({
      engine: this.engine,
      what: 'note engine',
      path: '/chat/completions',
      contentType: 'application/json',
      signal,
      retryBaseMs: this.options.retryBaseMs,
      body: () =>
        JSON.stringify({
          model: this.engine.model,
          temperature: 0,
          messages: [
            { role: 'system', content: SYSTEM_PROMPT },
            { role: 'user', content: userPrompt(request) },
          ],
        }),
    });
    const content = (answer as { choices?: { message?: { content?: unknown } }[] })?.choices?.[0]?.message?.content;
    if (typeof content !== 'string' || content.trim() === '') {
      throw new EngineError('note engine: the answer has no choices[0].message.content', true);
    }
    return sectionsFromAnswer(
      content,
      request.template.sections.map((s) => s.title),
    );
  }
}
