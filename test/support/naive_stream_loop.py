"""The streaming loop of OpenAI's Python quickstart, in the standard library only.

It reads a chat-completions stream as a developer's first loop does, indexing the first choice of
every chunk without checking that there is one:

    for chunk in stream:
        if chunk.choices[0].delta.content is not None:
            print(chunk.choices[0].delta.content, end="")

Usage: naive_stream_loop.py BASE_URL KEY MODEL PROMPT
Prints the streamed text, then one line `RESULT <json>` with the finish_reason and the usage seen.
An IndexError (or any other error) ends it with a traceback and a non-zero exit status.
"""

import json
import sys
import urllib.request


def main() -> None:
    base_url, key, model, prompt = sys.argv[1:5]
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(
            {"model": model, "messages": [{"role": "user", "content": prompt}], "stream": True}
        ).encode(),
        headers={"authorization": f"Bearer {key}", "content-type": "application/json"},
    )
    finish_reason = None
    usage = None
    with urllib.request.urlopen(request, timeout=30) as response:
        for raw in response:
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line.startswith("data: "):
                continue  # blank lines between events, keep-alive comments
            payload = line[len("data: "):]
            if payload == "[DONE]":
                break
            chunk = json.loads(payload)
            content = chunk["choices"][0]["delta"].get("content")
            if content is not None:
                print(content, end="", flush=True)
            finish_reason = chunk["choices"][0].get("finish_reason") or finish_reason
            usage = chunk.get("usage") or usage
    print()
    print("RESULT " + json.dumps({"finish_reason": finish_reason, "usage": usage}))


if __name__ == "__main__":
    main()
