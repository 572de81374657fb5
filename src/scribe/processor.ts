// One job, start to finish: transcribe the record's audio (if any), then for each template generate the
// note, file it as a DocumentReference, and finally complete the record and the job in one transaction.
// Each finished step is saved in the job's progress, so a retry or a take-over after a crash continues
// where the last attempt stopped: audio is not transcribed twice, a note is not generated twice, and a
// note filed by an interrupted attempt is filed again under the same id (a new version, not a duplicate).
import { randomUUID } from 'node:crypto';
import { AppError } from '../errors.js';
import type { FhirServices } from '../fhir/services.js';
import { documentReference } from './document-reference.js';
import { EngineError } from './engines/engine.js';
import type { NoteGenerator, SpeechToText } from './engines/engine.js';
import type { Job, JobQueue } from './queue.js';
import { markCompleted } from './records.js';
import type { ScribeNote, ScribeRecords } from './records.js';
import type { TemplateStore } from './templates.js';

/** A failure that another attempt cannot fix: the record ends FAILED at once. */
export class PermanentJobError extends Error {}

export function isPermanent(error: unknown): boolean {
  return error instanceof PermanentJobError || (error instanceof EngineError && !error.retryable);
}

export interface ProcessorParts {
  readonly records: ScribeRecords;
  readonly queue: JobQueue;
  readonly templates: TemplateStore;
  readonly notes: NoteGenerator;
  readonly stt: SpeechToText | undefined;
  readonly services: Pick<FhirServices, 'store' | 'validate'>;
  readonly clock?: () => Date;
}

export class ScribeProcessor {
  private readonly clock: () => Date;

  constructor(private readonly parts: ProcessorParts) {
    this.clock = parts.clock ?? (() => new Date());
  }

  async process(job: Job, signal: AbortSignal): Promise<void> {
    const { records, queue, templates, notes, stt, services } = this.parts;
    const record = await records.get(job.recordId);
    if (!record) throw new PermanentJobError(`scribe record ${job.recordId} no longer exists`);
    const progress = job.progress;

    if (progress.audioTranscripts === undefined) {
      const audio = await records.audio(record.id);
      const transcribed: string[] = [];
      if (audio.length > 0 && !stt) {
        throw new PermanentJobError('the record has audio files but the server no longer has a speech-to-text engine');
      }
      for (const file of audio) {
        const text = await stt!.transcribe(file, signal);
        if (text.trim() === '') throw new PermanentJobError(`no speech was recognised in ${file.filename}`);
        transcribed.push(text.trim());
      }
      progress.audioTranscripts = transcribed;
      await queue.saveProgress(job, progress);
      // The transcripts are saved: the audio is no longer needed (nor kept, were the record to fail later).
      if (audio.length > 0) await records.dropAudio(record.id);
    }
    const transcripts = [...record.transcripts, ...progress.audioTranscripts];

    for (const templateId of record.templateIds) {
      if (progress.notes.some((n) => n.templateId === templateId)) continue;
      const template = await templates.get(templateId);
      if (!template) throw new PermanentJobError(`template ${templateId} no longer exists`);
      let documentId = progress.documentIds[templateId];
      if (!documentId) {
        documentId = randomUUID();
        progress.documentIds[templateId] = documentId;
        await queue.saveProgress(job, progress);
      }
      const sections = await notes.generate(
        {
          template,
          transcripts,
          patientName: record.patientName ?? undefined,
          dateOfService: record.dateOfService ?? undefined,
          additionalContext: record.additionalContext ?? undefined,
        },
        signal,
      );
      const resource = documentReference({
        record,
        template,
        sections,
        generator: notes.name,
        date: this.clock().toISOString(),
      });
      const issues = services.validate(resource).filter((issue) => issue.severity === 'error');
      if (issues.length > 0) {
        const detail = issues.map((i) => `${i.expression}: ${i.diagnostics}`).join('; ');
        throw new PermanentJobError(`the note for template ${templateId} is not a valid DocumentReference: ${detail}`);
      }
      signal.throwIfAborted();
      try {
        await services.store.update({ ...resource, id: documentId });
      } catch (error) {
        // The store refused the note (e.g. AMBIENT_REFERENTIAL_INTEGRITY and the patient deleted meanwhile).
        if (error instanceof AppError && error.status < 500) {
          throw new PermanentJobError(`the note for template ${templateId} could not be filed: ${error.message}`);
        }
        throw error;
      }
      const note: ScribeNote = {
        templateId,
        templateName: template.name,
        sections,
        documentReference: `DocumentReference/${documentId}`,
      };
      progress.notes.push(note);
      await queue.saveProgress(job, progress);
    }

    const order = (note: ScribeNote) => record.templateIds.indexOf(note.templateId);
    const finished = [...progress.notes].sort((a, b) => order(a) - order(b));
    await queue.complete(job, (tx) =>
      markCompleted(tx, record.id, { transcripts, notes: finished, completedAt: this.clock().toISOString() }),
    );
  }
}
