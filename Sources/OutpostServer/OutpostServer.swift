// OutpostServer: the feature service and tiled map service over HTTP (DESIGN §6). Its code lands with the server issue.
