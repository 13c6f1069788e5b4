import asyncio
from typing import Any

from slimcache import TrimCompressor


async def main() -> None:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."}]
    for i in range(10):
        role = ("user", "assistant")[i % 2]
        history.append({"role": role, "content": f"turn {i}: " + "blah " * 20})

    trimmed = await TrimCompressor(max_tokens=120).compress(history)
    print(len(history), "messages ->", len(trimmed))
    for message in trimmed:
        print(message["role"], "|", message["content"][:7])


asyncio.run(main())
