#!/usr/bin/env python3
"""ClickHouse's HTTP interface over chdb (a current ClickHouse engine, from PyPI), so that kansoku's fleet store --
its schema and every query it sends -- can be run against today's engine as well as Debian's 18.16.

Usage: chdb_server.py DATADIR   (prints "listening on PORT" and serves 127.0.0.1:PORT until killed)

Only what kansoku's store client uses: POST with the statement in the body, or `query=` in the URL and the rows
in the body; `database=` selects the database; errors answer 500 with the engine's message. Authentication is
not checked (it is ClickHouse's own, tested against the real server).
"""

import http.server
import sys
import urllib.parse

from chdb import session as chs


class Handler(http.server.BaseHTTPRequestHandler):
    sess = None

    def log_message(self, *args):
        pass

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        params = urllib.parse.parse_qs(url.query)
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode()
        if "query" in params:
            sql = params["query"][0] + "\n" + body
        else:
            sql = body
        db = params.get("database", [None])[0]
        try:
            if db:
                self.sess.query(f"USE {db}")
            res = self.sess.query(sql, "TabSeparated")
            out = res.bytes() if hasattr(res, "bytes") else bytes(res)
            code = 200
        except Exception as e:  # the engine's message, as ClickHouse answers it
            out = ("Code: 0. " + str(e)).encode()
            code = 500
        self.send_response(code)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


def main():
    Handler.sess = chs.Session(sys.argv[1])
    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    print(f"listening on {srv.server_address[1]}", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
