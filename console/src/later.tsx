// Scribe and Exports: their screens come in the console's next version. Until then each page says what
// the API offers, without pretending to be the screen.
import type { JSX } from 'preact';

export function ScribeScreen(): JSX.Element {
  return (
    <section class="prose">
      <h1>Scribe</h1>
      <p>
        The scribe records of this account (visits posted as transcripts or audio, and the notes written from them) are
        not shown in this version of the console.
      </p>
      <p>
        Use the scribe API meanwhile: <code>POST /v1/ambient/api/scribe</code> to submit a visit,{' '}
        <code>GET /v1/ambient/api/scribe</code> to list the records. The notes are filed as DocumentReference resources,
        which the Resources page shows.
      </p>
    </section>
  );
}

export function ExportsScreen(): JSX.Element {
  return (
    <section class="prose">
      <h1>Exports</h1>
      <p>Starting a Bulk Data export and downloading its files is not in this version of the console.</p>
      <p>
        Use the API meanwhile: <code>GET /fhir/$export</code> with <code>Prefer: respond-async</code> starts one and
        answers the address to poll for its files.
      </p>
    </section>
  );
}
