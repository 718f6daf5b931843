// OutpostProtocol: the wire types both sides share: ArcGIS REST bodies, sync batches, feed pages, conflict records (DESIGN §2, §5). Its types land with the server and sync issues.
