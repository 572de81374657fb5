// The Bulk Data IG's server capability the CapabilityStatement instantiates; the export operations it
// lists come from the route table (fhir/router.ts), with the routes that serve them.
export const BULK_DATA_CAPABILITY = 'http://hl7.org/fhir/uv/bulkdata/CapabilityStatement/bulk-data';
