// What the CapabilityStatement says about Bulk Data export: the IG's server capability it instantiates
// and its operations at the system, Patient and Group levels (http/export-routes.ts serves them).
const IG = 'http://hl7.org/fhir/uv/bulkdata';

export const BULK_DATA_CAPABILITY = `${IG}/CapabilityStatement/bulk-data`;

export const SYSTEM_EXPORT_OPERATION = { name: 'export', definition: `${IG}/OperationDefinition/export` };

/** The type-level export operations, by type. */
export const TYPE_EXPORT_OPERATIONS: Readonly<Record<string, { name: string; definition: string }>> = {
  Patient: { name: 'export', definition: `${IG}/OperationDefinition/patient-export` },
  Group: { name: 'export', definition: `${IG}/OperationDefinition/group-export` },
};
