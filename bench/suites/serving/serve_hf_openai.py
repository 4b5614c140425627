"""A small OpenAI-compatible server over HF transformers (random bf16 weights, bench/lib/hf_random.py), so
`fastkernels bench-serve` measures HF with the same client and workload as ours. /v1/models and streamed
/v1/completions with token-id prompts (what bench-serve's random workload sends), greedy, one request at a time (a
lock: HF has no continuous batching), a KV cache per request (past_key_values), one SSE chunk per token, usage in the
last chunk. Usage: serve_hf_openai.py --config CONFIG.json --port P"""
import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--port", type=int, required=True)
    a = ap.parse_args()
    import torch
    from transformers import AutoConfig
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
    from hf_random import random_bf16_model

    cfg = AutoConfig.from_pretrained(str(Path(a.config).parent))
    model = random_bf16_model(cfg)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet
            pass

        def _json(self, status, obj):
            body = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/v1/models":
                return self._json(200, {"object": "list", "data": [{"id": "hf-transformers", "object": "model"}]})
            if self.path == "/health":
                return self._json(200, {"status": "ok"})
            return self._json(404, {"error": {"message": "no route", "type": "not_found_error"}})

        def do_POST(self):
            if self.path != "/v1/completions":
                return self._json(404, {"error": {"message": "no route", "type": "not_found_error"}})
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))))
            prompt = body.get("prompt")
            if not isinstance(prompt, list) or not all(isinstance(x, int) for x in prompt):
                return self._json(400, {"error": {"message": "prompt must be token ids", "type": "invalid_request_error"}})
            max_tokens = int(body.get("max_tokens", 16))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("connection", "close")
            self.end_headers()
            with lock, torch.no_grad():
                ids = torch.tensor([prompt], device="cuda")
                past = None
                for i in range(max_tokens):
                    out = model(input_ids=ids, past_key_values=past, use_cache=True)
                    past = out.past_key_values
                    tok = int(out.logits[0, -1].argmax())
                    ids = torch.tensor([[tok]], device="cuda")
                    chunk = {"object": "text_completion", "choices": [{"index": 0, "text": "", "token_ids": [tok], "finish_reason": "length" if i == max_tokens - 1 else None}]}
                    try:
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        return
            usage = {"prompt_tokens": len(prompt), "completion_tokens": max_tokens, "total_tokens": len(prompt) + max_tokens}
            try:
                self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\ndata: [DONE]\n\n".encode())
            except (BrokenPipeError, ConnectionResetError):
                pass

    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    print(f"serving hf-transformers on http://127.0.0.1:{a.port}/v1", flush=True)
    srv.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
