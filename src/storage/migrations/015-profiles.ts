import type { Migration } from './migration.js';

// Profiles (docs/validation.md, "Profiles"): one row per stored profile (a StructureDefinition with a url
// and derivation constraint), kept in
// step by profiles/index-writer.ts inside each write's transaction, so that a write naming a profile in
// meta.profile finds its current version with one indexed read, and the CapabilityStatement lists them
// without reading any content. The StructureDefinitions stored before this version are listed here; one
// whose content is not such JSON is left out, as the writer would leave it.
export const profilesMigration: Migration = {
  version: 15,
  name: 'profiles',
  statements: (d) => [
    `CREATE TABLE profile (
      pk ${d.bigint} PRIMARY KEY REFERENCES resource (pk),
      id TEXT NOT NULL,
      url TEXT NOT NULL,
      version TEXT,
      type TEXT NOT NULL
    )`,
    `CREATE INDEX profile_url ON profile (url)`,
    ...backfill(d.name),
  ],
};

function backfill(dialect: 'sqlite' | 'postgres'): string[] {
  if (dialect === 'sqlite') {
    return [
      `INSERT INTO profile (pk, id, url, version, type)
       SELECT pk, id, json_extract(content, '$.url'),
              CASE WHEN json_type(content, '$.version') = 'text' THEN json_extract(content, '$.version') END,
              CASE WHEN json_type(content, '$.type') = 'text' THEN json_extract(content, '$.type') ELSE '' END
       FROM resource
       WHERE type = 'StructureDefinition' AND deleted = 0 AND json_valid(content)
         AND json_type(content, '$.url') = 'text' AND json_extract(content, '$.derivation') = 'constraint'`,
    ];
  }
  // Row by row: a content that jsonb refuses (a lone surrogate escape) skips its row, not the migration.
  return [
    `DO $$
     DECLARE r record; parsed jsonb;
     BEGIN
       FOR r IN SELECT pk, id, content FROM resource WHERE type = 'StructureDefinition' AND deleted = 0 LOOP
         BEGIN
           parsed := r.content::jsonb;
           IF jsonb_typeof(parsed -> 'url') = 'string' AND parsed ->> 'derivation' = 'constraint' THEN
             INSERT INTO profile (pk, id, url, version, type) VALUES (r.pk, r.id, parsed ->> 'url',
               CASE WHEN jsonb_typeof(parsed -> 'version') = 'string' THEN parsed ->> 'version' END,
               CASE WHEN jsonb_typeof(parsed -> 'type') = 'string' THEN parsed ->> 'type' ELSE '' END);
           END IF;
         EXCEPTION WHEN others THEN NULL;
         END;
       END LOOP;
     END $$`,
  ];
}
