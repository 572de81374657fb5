/*
 * A loadable SQLite extension that lets one thread stop a statement another thread is running.
 *
 * better-sqlite3 runs a statement to completion inside one native call and is built without
 * SQLite's progress callback, so neither a JavaScript timer nor Worker.terminate() can stop a long
 * search: the thread only notices a termination once the statement returns. sqlite3_interrupt() is
 * the one SQLite call made to be used from another thread. src/storage/sqlite/read-pool.ts loads
 * this extension into each read worker's connection (to learn its handle) and into a private
 * in-memory connection on the main thread (to interrupt a worker's connection past its deadline).
 * src/storage/sqlite/writer-watchdog.ts does the reverse for the writer: the writer's connection, on
 * the main thread, gives its handle to a watchdog thread, which interrupts it past an armed deadline.
 *
 * Two entry points, so that each connection gets only the function it needs:
 *   sqlite3_ambienthandle_init:    ambient_connection_handle() -> this connection's sqlite3 pointer
 *   sqlite3_ambientinterrupt_init: ambient_interrupt(handle)   -> sqlite3_interrupt(handle)
 * The main thread interrupts only handles of worker connections that are open and busy with a
 * statement it dispatched (the pool closes a worker's connection only after it stopped using it); the
 * watchdog only the writer's, while a statement is armed (the writer is closed after the watchdog).
 */
#include <stdint.h>
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1

static void connection_handle(sqlite3_context *context, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  sqlite3_result_int64(context, (sqlite3_int64)(intptr_t)sqlite3_context_db_handle(context));
}

static void interrupt_connection(sqlite3_context *context, int argc, sqlite3_value **argv) {
  (void)argc;
  sqlite3_int64 handle = sqlite3_value_int64(argv[0]);
  if (handle != 0) sqlite3_interrupt((sqlite3 *)(intptr_t)handle);
  sqlite3_result_int(context, 1);
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_ambienthandle_init(sqlite3 *db, char **error, const sqlite3_api_routines *api) {
  SQLITE_EXTENSION_INIT2(api)
  (void)error;
  return sqlite3_create_function(db, "ambient_connection_handle", 0, SQLITE_UTF8, 0, connection_handle, 0, 0);
}

#ifdef _WIN32
__declspec(dllexport)
#endif
int sqlite3_ambientinterrupt_init(sqlite3 *db, char **error, const sqlite3_api_routines *api) {
  SQLITE_EXTENSION_INIT2(api)
  (void)error;
  return sqlite3_create_function(db, "ambient_interrupt", 1, SQLITE_UTF8, 0, interrupt_connection, 0, 0);
}
