import asyncio, nats, ssl
async def main():
    ctx = ssl.create_default_context(cafile="/tmp/.tmpbLBkRy/ca.pem")
    nc = await nats.connect("tls://127.0.0.1:43955", tls=ctx, max_reconnect_attempts=0, user="ops", password="right-pw", connect_timeout=3)
    print("ok", nc.connected_url)
    await nc.close()
asyncio.run(main())
