-- Wireshark dissector for Homa, IP protocol 146, in the wire format of the
-- Linux kernel module (HomaModule `main`) and of homa-stack
-- (docs/protocol.md section 3). Registered on ip.proto 146, which serves IPv4 and IPv6; a
-- postdissector also decodes Homa that Linux sent as TCP (hijack mode).
--
-- Install: copy this file into Wireshark's personal Lua plugins folder
-- (Help > About Wireshark > Folders > Personal Lua Plugins, on Linux
-- ~/.local/lib/wireshark/plugins/), or run
--   tshark -X lua_script:dissector/homa.lua -r capture.pcap
--
-- Every field has a filter name (homa.type, homa.sender_id, homa.rpc_id,
-- homa.data.offset, homa.ack.client_id, ...). homa.rpc_id is the client's id
-- of the RPC (sender_id with the low bit cleared), so `homa.rpc_id == 100`
-- shows both sides of one RPC. The Info column reads like homa-dump's line.
--
-- The checksum is TCP-style over a pseudo-header with protocol 6 (TCP), as
-- Linux fills it; no receiver checks it. It is verified when the preference
-- "homa.check_checksum" is on (-o homa.check_checksum:TRUE). Frames
-- captured on the sending host usually carry a partial checksum (only the
-- pseudo-header sum): Linux leaves the rest to the NIC.
--
-- Written for Wireshark 3.x and 4.x (Lua 5.2 to 5.4): integer arithmetic
-- only, no bit library.

local homa = Proto("homa", "Homa")

local TYPES = {
    [0x10] = "DATA", [0x11] = "GRANT", [0x12] = "RESEND", [0x13] = "RPC_UNKNOWN",
    [0x14] = "BUSY", [0x15] = "CUTOFFS", [0x16] = "FREEZE", [0x17] = "NEED_ACK",
    [0x18] = "ACK",
}
-- Header length per type; RESEND is 37 bytes (36 from upstream builds).
local HEADER_LEN = {
    [0x10] = 56, [0x11] = 33, [0x12] = 37, [0x13] = 28, [0x14] = 28,
    [0x15] = 62, [0x16] = 28, [0x17] = 28, [0x18] = 80,
}
local RESEND_UPSTREAM_LEN = 36
local COMMON_LEN = 28
local MAX_ACKS = 5
local OFFSET_IN_SEQUENCE = 0xFFFFFFFF
local NUM_PRIORITIES = 8

-- Checksum status, in the order Wireshark's own dissectors use, plus the
-- two Homa cases.
local CK_BAD, CK_GOOD, CK_UNVERIFIED, CK_ZERO, CK_PARTIAL = 0, 1, 2, 3, 4
local CK_NAMES = {
    [CK_BAD] = "Bad", [CK_GOOD] = "Good", [CK_UNVERIFIED] = "Unverified",
    [CK_ZERO] = "Not present (zero)",
    [CK_PARTIAL] = "Partial (pseudo-header only: captured before checksum offload)",
}

local f = {
    sport = ProtoField.uint16("homa.sport", "Source port", base.DEC),
    dport = ProtoField.uint16("homa.dport", "Destination port", base.DEC),
    port = ProtoField.uint16("homa.port", "Port", base.DEC),
    sequence = ProtoField.uint32("homa.sequence", "Sequence (DATA offset)", base.DEC),
    common_ack = ProtoField.bytes("homa.common_ack", "Unused ack bytes"),
    type = ProtoField.uint8("homa.type", "Type", base.HEX, TYPES),
    doff = ProtoField.uint8("homa.doff", "Header length (words)", base.DEC, nil, 0xF0),
    flags = ProtoField.uint8("homa.flags", "Flags", base.HEX),
    window = ProtoField.uint16("homa.window", "Window (unused)", base.DEC),
    checksum = ProtoField.uint16("homa.checksum", "Checksum", base.HEX),
    checksum_status = ProtoField.uint8("homa.checksum.status", "Checksum status", base.DEC, CK_NAMES),
    checksum_expected = ProtoField.uint16("homa.checksum.expected", "Expected checksum", base.HEX),
    urgent = ProtoField.uint16("homa.urgent", "Urgent pointer", base.HEX),
    sender_id = ProtoField.uint64("homa.sender_id", "Sender id", base.DEC),
    rpc_id = ProtoField.uint64("homa.rpc_id", "RPC id (client's)", base.DEC),
    from_server = ProtoField.bool("homa.from_server", "Sent by the server"),

    data_message_length = ProtoField.uint32("homa.data.message_length", "Message length", base.DEC),
    data_incoming = ProtoField.uint32("homa.data.incoming", "Incoming (unscheduled bytes)", base.DEC),
    data_ack_client_id = ProtoField.uint64("homa.data.ack_client_id", "Ack: client id", base.DEC),
    data_ack_server_port = ProtoField.uint16("homa.data.ack_server_port", "Ack: server port", base.DEC),
    data_cutoff_version = ProtoField.uint16("homa.data.cutoff_version", "Cutoff version", base.DEC),
    data_retransmit = ProtoField.uint8("homa.data.retransmit", "Retransmit", base.DEC),
    data_pad = ProtoField.bytes("homa.data.pad", "Pad"),
    data_seg_offset = ProtoField.uint32("homa.data.seg_offset", "Segment offset", base.DEC,
        { [OFFSET_IN_SEQUENCE] = "0xFFFFFFFF: offset is in sequence" }),
    data_offset = ProtoField.uint32("homa.data.offset", "Offset", base.DEC),
    data_payload_len = ProtoField.uint32("homa.data.payload_len", "Payload length", base.DEC),
    data_payload = ProtoField.bytes("homa.data.payload", "Payload"),

    grant_offset = ProtoField.uint32("homa.grant.offset", "Granted offset", base.DEC),
    grant_priority = ProtoField.uint8("homa.grant.priority", "Priority", base.DEC),

    resend_offset = ProtoField.uint32("homa.resend.offset", "Offset", base.DEC),
    resend_length = ProtoField.uint32("homa.resend.length", "Length", base.DEC,
        { [0xFFFFFFFF] = "all (nothing received)" }),
    resend_priority = ProtoField.uint8("homa.resend.priority", "Priority", base.DEC),

    cutoffs_cutoff = ProtoField.uint32("homa.cutoffs.cutoff", "Unscheduled cutoff", base.DEC),
    cutoffs_version = ProtoField.uint16("homa.cutoffs.version", "Cutoff version", base.DEC),

    ack_num_acks = ProtoField.uint16("homa.ack.num_acks", "Number of acks", base.DEC),
    ack_client_id = ProtoField.uint64("homa.ack.client_id", "Client id", base.DEC),
    ack_server_port = ProtoField.uint16("homa.ack.server_port", "Server port", base.DEC),
}
local field_list = {}
for _, v in pairs(f) do field_list[#field_list + 1] = v end
homa.fields = field_list

local ef = {
    unknown_type = ProtoExpert.new("homa.unknown_type", "Unknown Homa packet type",
        expert.group.MALFORMED, expert.severity.ERROR),
    short = ProtoExpert.new("homa.short", "Shorter than the header of its type",
        expert.group.MALFORMED, expert.severity.ERROR),
    truncated = ProtoExpert.new("homa.truncated", "Packet cut by the snap length",
        expert.group.MALFORMED, expert.severity.NOTE),
    bad_checksum = ProtoExpert.new("homa.bad_checksum", "Bad checksum",
        expert.group.CHECKSUM, expert.severity.ERROR),
    partial_checksum = ProtoExpert.new("homa.partial_checksum",
        "Partial checksum: Linux leaves it for the NIC; captured before offload completed it",
        expert.group.CHECKSUM, expert.severity.NOTE),
    num_acks = ProtoExpert.new("homa.ack.clamped", "num_acks above 5: receivers use 5",
        expert.group.PROTOCOL, expert.severity.WARN),
    upstream_resend = ProtoExpert.new("homa.resend.upstream",
        "36-byte RESEND (upstream form): no priority byte, the highest is used",
        expert.group.PROTOCOL, expert.severity.NOTE),
    sentinel = ProtoExpert.new("homa.data.sentinel",
        "seg.offset is 0xFFFFFFFF: the offset is in the sequence field",
        expert.group.SEQUENCE, expert.severity.CHAT),
}
homa.experts = { ef.unknown_type, ef.short, ef.truncated, ef.bad_checksum,
    ef.partial_checksum, ef.num_acks, ef.upstream_resend, ef.sentinel }

homa.prefs.check_checksum = Pref.bool("Validate the checksum", false,
    "Verify the TCP-style checksum (pseudo-header with protocol 6)")

local ip_version_f = Field.new("ip.version")
local ip_src_f = Field.new("ip.src")
local ip_dst_f = Field.new("ip.dst")
local ip_dsfield_f = Field.new("ip.dsfield")
local ipv6_src_f = Field.new("ipv6.src")
local ipv6_dst_f = Field.new("ipv6.dst")
local ipv6_tclass_f = Field.new("ipv6.tclass")

-- The last value of a field in this packet (the innermost IP header).
local function last(field)
    local all = { field() }
    return all[#all]
end

-- The IP addresses (as text and as bytes) and the Homa priority (TOS or
-- traffic class >> 5) of the packet.
local function ip_info()
    local v6src, v6dst = last(ipv6_src_f), last(ipv6_dst_f)
    local v4src, v4dst = last(ip_src_f), last(ip_dst_f)
    local v4ver = last(ip_version_f)
    if v6src and not (v4ver and v4src and v4src.offset > v6src.offset) then
        local tc = last(ipv6_tclass_f)
        return "[" .. tostring(v6src) .. "]", "[" .. tostring(v6dst) .. "]",
            v6src.range:bytes(), v6dst.range:bytes(), 6, tc and math.floor(tc.value / 32)
    end
    if v4src then
        local ds = last(ip_dsfield_f)
        return tostring(v4src), tostring(v4dst), v4src.range:bytes(), v4dst.range:bytes(), 4,
            ds and math.floor(ds.value / 32)
    end
    return "?", "?", nil, nil, 0, nil
end

-- Ones'-complement sum of the big-endian 16-bit words of a ByteArray.
local function sum_bytes(acc, ba)
    local n = ba:len()
    local i = 0
    while i + 1 < n do
        acc = acc + ba:get_index(i) * 256 + ba:get_index(i + 1)
        i = i + 2
    end
    if i < n then acc = acc + ba:get_index(i) * 256 end
    return acc
end

local function fold(acc)
    while acc > 0xFFFF do acc = (acc % 0x10000) + math.floor(acc / 0x10000) end
    return acc
end

-- The checksum's status and, when bad, the right value.
local function verify_checksum(tvb, wire, src, dst, version)
    local len = wire
    if tvb:captured_len() < wire then return CK_UNVERIFIED end
    local field = tvb(16, 2):uint()
    if field == 0 then return CK_ZERO end
    if not src then return CK_UNVERIFIED end
    local pseudo = sum_bytes(0, src)
    pseudo = sum_bytes(pseudo, dst)
    if version == 6 then
        pseudo = pseudo + math.floor(len / 0x10000) + (len % 0x10000) + 6
    else
        pseudo = pseudo + 6 + len
    end
    pseudo = fold(pseudo)
    local all = fold(sum_bytes(pseudo, tvb(0, len):bytes()))
    if all == 0xFFFF then return CK_GOOD end
    if field == pseudo then return CK_PARTIAL end
    -- Without the field (add its complement), complemented.
    local without = fold(all + (0xFFFF - field))
    return CK_BAD, 0xFFFF - without
end

local function u64(tvb, at) return tvb(at, 8):uint64() end

-- Dissects the Homa packet in `tvb`, `wire` bytes long on the wire (more
-- than captured when the snap length cut it).
local function dissect_homa(tvb, pinfo, tree, wire, hijacked)
    pinfo.cols.protocol = "HOMA"
    local captured = tvb:captured_len()
    local src, dst, src_bytes, dst_bytes, version, prio = ip_info()
    local subtree = tree:add(homa, tvb(), "Homa")

    local function info(s) pinfo.cols.info = s end

    if captured < 12 then
        local s = string.format("HOMA [header truncated: %d of %d bytes captured]", captured, wire)
        info("[" .. s .. "]")
        subtree:add_proto_expert_info(ef.truncated)
        return
    end
    local t = tvb(11, 1):uint()
    local name = TYPES[t]
    if not name then
        subtree:add(f.type, tvb(11, 1))
        subtree:add_proto_expert_info(ef.unknown_type)
        info(string.format("[malformed HOMA: unknown type 0x%02x]", t))
        return
    end
    local header_len = HEADER_LEN[t]
    if t == 0x12 and wire < header_len then header_len = RESEND_UPSTREAM_LEN end
    if wire < header_len then
        subtree:add(f.type, tvb(11, 1))
        subtree:add_proto_expert_info(ef.short)
        info(string.format("[malformed HOMA: %s of %d bytes, shorter than its %d-byte header]",
            name, wire, header_len))
        return
    end
    subtree:append_text(", " .. name)

    local line = string.format("%s %s:%d > %s:%d", name, src, tvb(0, 2):uint(), dst, tvb(2, 2):uint())
    subtree:add(f.sport, tvb(0, 2))
    subtree:add(f.dport, tvb(2, 2))
    subtree:add(f.port, tvb(0, 2)):set_hidden()
    subtree:add(f.port, tvb(2, 2)):set_hidden()
    if captured < COMMON_LEN then
        subtree:add(f.type, tvb(11, 1))
        info(string.format("%s [header truncated: %d of %d bytes captured]", line, captured, wire))
        subtree:add_proto_expert_info(ef.truncated)
        return
    end
    subtree:add(f.sequence, tvb(4, 4))
    subtree:add(f.common_ack, tvb(8, 3))
    subtree:add(f.type, tvb(11, 1))
    subtree:add(f.doff, tvb(12, 1))
    subtree:add(f.flags, tvb(13, 1))
    subtree:add(f.window, tvb(14, 2))
    local ck_item = subtree:add(f.checksum, tvb(16, 2))
    subtree:add(f.urgent, tvb(18, 2))
    local sender = u64(tvb, 20)
    local low = tvb(27, 1):uint() % 2
    subtree:add(f.sender_id, tvb(20, 8))
    subtree:add(f.rpc_id, tvb(20, 8), sender - low):set_generated()
    subtree:add(f.from_server, tvb(27, 1), low == 1):set_generated()
    line = line .. " id " .. tostring(sender)

    local status, expected = CK_UNVERIFIED, nil
    if homa.prefs.check_checksum then
        status, expected = verify_checksum(tvb, wire, src_bytes, dst_bytes, version)
    end
    ck_item:add(f.checksum_status, tvb(16, 2), status):set_generated()
    if status == CK_BAD then
        ck_item:add(f.checksum_expected, tvb(16, 2), expected):set_generated()
        ck_item:add_proto_expert_info(ef.bad_checksum)
    elseif status == CK_PARTIAL then
        ck_item:add_proto_expert_info(ef.partial_checksum)
    end

    -- A header cut by the snap length: the line says so, and the fields
    -- are added until the first missing byte (Wireshark then notes the
    -- packet as cut).
    if captured < header_len then
        info(string.format("%s [header truncated: %d of %d header bytes captured] prio %s",
            line, captured, header_len, tostring(prio)))
        subtree:add_proto_expert_info(ef.truncated)
    end

    -- Each field is added before its value is read, so a cut header shows
    -- every field before the cut.
    local function field(pf, at, len)
        subtree:add(pf, tvb(at, len))
        return tvb(at, len)
    end
    if t == 0x10 then
        local msg_len = field(f.data_message_length, 28, 4):uint()
        local incoming = field(f.data_incoming, 32, 4):uint()
        local ack_id = field(f.data_ack_client_id, 36, 8):uint64()
        local ack_port = field(f.data_ack_server_port, 44, 2):uint()
        local cv = field(f.data_cutoff_version, 46, 2):uint()
        local retx = field(f.data_retransmit, 48, 1):uint()
        field(f.data_pad, 49, 3)
        local seg_item = subtree:add(f.data_seg_offset, tvb(52, 4))
        local seg = tvb(52, 4):uint()
        local offset = seg
        if seg == OFFSET_IN_SEQUENCE then
            offset = tvb(4, 4):uint()
            seg_item:add_proto_expert_info(ef.sentinel)
        end
        local payload_len = wire - 56
        subtree:add(f.data_offset, tvb(52, 4), offset):set_generated()
        subtree:add(f.data_payload_len, tvb(52, 4), payload_len):set_generated()
        if captured > 56 then subtree:add(f.data_payload, tvb(56, captured - 56)) end
        line = line .. string.format(" off %d len %d/%d incoming %d", offset, payload_len, msg_len, incoming)
        if ack_id ~= UInt64(0) then line = line .. " ack " .. tostring(ack_id) .. ":" .. ack_port end
        if retx ~= 0 then line = line .. " retx" end
        if cv ~= 0 then line = line .. " cv " .. cv end
    elseif t == 0x11 then
        local offset = field(f.grant_offset, 28, 4):uint()
        local p = field(f.grant_priority, 32, 1):uint()
        line = line .. string.format(" offset %d sched-prio %d", offset, p)
    elseif t == 0x12 then
        local offset = field(f.resend_offset, 28, 4):uint()
        local length = field(f.resend_length, 32, 4):uint()
        local p = NUM_PRIORITIES - 1
        if header_len > RESEND_UPSTREAM_LEN then
            p = field(f.resend_priority, 36, 1):uint()
        else
            subtree:add_proto_expert_info(ef.upstream_resend)
        end
        local l = tostring(length)
        if length == 0xFFFFFFFF then l = "all" end
        line = line .. string.format(" off %d len %s retx-prio %d", offset, l, p)
    elseif t == 0x15 then
        local cutoffs = {}
        for i = 0, 7 do
            cutoffs[#cutoffs + 1] = tostring(field(f.cutoffs_cutoff, 28 + 4 * i, 4):uint())
        end
        local version = field(f.cutoffs_version, 60, 2):uint()
        line = line .. " cutoffs [" .. table.concat(cutoffs, ", ") .. "] version " .. version
    elseif t == 0x18 then
        local n = field(f.ack_num_acks, 28, 2):uint()
        if n > MAX_ACKS then
            subtree:add_proto_expert_info(ef.num_acks)
            n = MAX_ACKS
        end
        local acks = {}
        for i = 0, n - 1 do
            local at = 30 + 10 * i
            local entry = subtree:add(homa, tvb(at, 10), "Ack " .. i)
            entry:add(f.ack_client_id, tvb(at, 8))
            entry:add(f.ack_server_port, tvb(at + 8, 2))
            acks[#acks + 1] = tostring(tvb(at, 8):uint64()) .. ":" .. tvb(at + 8, 2):uint()
        end
        line = line .. " acks [" .. table.concat(acks, ", ") .. "]"
    end
    if captured < header_len then return end
    line = line .. " prio " .. tostring(prio)
    if hijacked then line = line .. " hijacked" end
    if captured < wire then
        line = line .. string.format(" [truncated: %d of %d bytes captured]", captured, wire)
        subtree:add_proto_expert_info(ef.truncated)
    end
    if status == CK_BAD then line = line .. " [bad checksum]" end
    info(line)
end

function homa.dissector(tvb, pinfo, tree)
    dissect_homa(tvb, pinfo, tree, tvb:reported_len(), false)
end

DissectorTable.get("ip.proto"):add(146, homa)

-- Linux can send Homa as TCP (its hijack mode, docs/protocol.md 2.4): TCP
-- segments with flags SYN|RST (6) and urgent pointer 0xb97d. Wireshark's
-- TCP dissector takes them first, so a postdissector finds them and
-- decodes the TCP header and payload as the Homa packet they are.
local hijack = Proto("homa_hijack", "Homa carried as TCP")
local tcp_flags_f = Field.new("tcp.flags")
local tcp_urgent_f = Field.new("tcp.urgent_pointer")
local tcp_srcport_f = Field.new("tcp.srcport")
local tcp_len_f = Field.new("tcp.len")
local tcp_hdr_len_f = Field.new("tcp.hdr_len")
local HIJACK_FLAGS = 6
local HIJACK_URGENT = 0xb97d

function hijack.dissector(tvb, pinfo, tree)
    local flags, urgent = last(tcp_flags_f), last(tcp_urgent_f)
    if not (flags and urgent) or flags.value ~= HIJACK_FLAGS or urgent.value ~= HIJACK_URGENT then
        return
    end
    local start = last(tcp_srcport_f).offset
    local len = last(tcp_hdr_len_f).value + last(tcp_len_f).value
    -- A sub-tvb of the captured bytes; the wire length is passed apart.
    local sub = tvb:range(start, math.min(len, tvb:captured_len() - start)):tvb()
    dissect_homa(sub, pinfo, tree, len, true)
    pinfo.cols.protocol = "HOMA/TCP"
end

register_postdissector(hijack)
