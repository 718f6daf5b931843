// OutpostSync: GeodatabaseSyncTask, its jobs and the sync protocol client (DESIGN §5). Its code lands with the sync issue.
