// canzona-wire: the data network of scripts/cluster.sh, a switch between network namespaces with
// a set rate and one-way delay per link (docs/cluster.md).
//
// Every namespace ("host") has a TUN device (made by cluster.sh, `ip tuntap add`) holding its
// data-network address. The wire attaches to each device from inside its namespace and forwards
// the IPv4 packets a host sends to the host that owns the destination address, as a
// store-and-forward switch would: a packet of L bytes leaves its sender's port L x 8 / rate after
// the port's previous packet, crosses the link in `delay`, and leaves the switch port of its
// receiver L x 8 / rate after that port's previous packet. A packet that would take either port's
// backlog past --queue-bytes is dropped (TCP then slows down, as on a real switch). A packet to an
// address of no host, or that is not IPv4, is dropped: nothing leaves the namespaces.
//
// The kernel's netem qdisc would add the delay, but the kernels this project runs on are built
// without it (`tc qdisc add ... netem` answers "Specified qdisc kind is unknown"), so the wire
// does it in user space. A host whose device is set down (`ip link set czd0 down`, a cut link)
// neither sends nor receives; the wire drops what it cannot deliver.
//
//   canzona-wire --netns NS0,NS1 --addrs A0,A1 --dev czd0 --rate-bps 1e9 --delay-us 200
//                [--queue-bytes N] [--ready FILE]
//
// It runs until SIGTERM or SIGINT, then prints per-port counters on stderr. Errors are one line,
// "canzona-wire: error: ...", exit 2.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

namespace {

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "canzona-wire: error: %s\n", message.c_str());
  std::exit(2);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    out.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

double parse_number(const char* flag, const std::string& text, double min_value) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(value >= min_value))
    fail(std::string(flag) + " must be a number >= " + std::to_string(min_value) + " (got '" +
         text + "')");
  return value;
}

std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

volatile sig_atomic_t g_stop = 0;
void on_signal(int) {
  g_stop = 1;
}

struct Packet {
  std::int64_t deliver_ns;
  std::vector<std::uint8_t> bytes;
};

struct Port {
  std::string netns;
  std::uint32_t addr = 0;  // network byte order
  int fd = -1;
  std::int64_t tx_free_ns = 0;  // when the sender side of the port is free
  std::int64_t rx_free_ns = 0;  // when the switch side (towards the host) is free
  std::deque<Packet> queue;     // to this host, in delivery order
  std::int64_t sent_bytes = 0, sent_packets = 0, received_bytes = 0, dropped = 0;
};

// Opens the TUN device `dev` inside network namespace `netns`; the descriptor stays bound to it.
int attach(const std::string& netns, const std::string& dev, int home) {
  const std::string path = "/run/netns/" + netns;
  const int ns = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (ns < 0) fail("cannot open network namespace " + path + ": " + std::strerror(errno));
  if (setns(ns, CLONE_NEWNET) != 0) fail("setns " + netns + ": " + std::strerror(errno));
  close(ns);
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail(std::string("cannot open /dev/net/tun: ") + std::strerror(errno));
  ifreq request{};
  request.ifr_flags = IFF_TUN | IFF_NO_PI;
  std::snprintf(request.ifr_name, IFNAMSIZ, "%s", dev.c_str());
  if (ioctl(fd, TUNSETIFF, &request) != 0)
    fail("cannot attach to " + dev + " in " + netns + ": " + std::strerror(errno));
  if (setns(home, CLONE_NEWNET) != 0) fail(std::string("setns back: ") + std::strerror(errno));
  return fd;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> netns, addrs;
  std::string dev = "czd0", ready;
  double rate_bps = 1e9, delay_us = 200, queue_bytes = 4 << 20;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) fail(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--netns")
      netns = split(value);
    else if (flag == "--addrs")
      addrs = split(value);
    else if (flag == "--dev")
      dev = value;
    else if (flag == "--rate-bps")
      rate_bps = parse_number("--rate-bps", value, 1e3);
    else if (flag == "--delay-us")
      delay_us = parse_number("--delay-us", value, 0);
    else if (flag == "--queue-bytes")
      queue_bytes = parse_number("--queue-bytes", value, 65536);
    else if (flag == "--ready")
      ready = value;
    else
      fail("unknown flag " + flag);
  }
  if (netns.empty() || netns[0].empty()) fail("--netns needs at least one namespace");
  if (addrs.size() != netns.size()) fail("--addrs needs one address per namespace");

  std::vector<Port> ports(netns.size());
  const int home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  if (home < 0) fail(std::string("cannot open /proc/self/ns/net: ") + std::strerror(errno));
  for (std::size_t h = 0; h < ports.size(); ++h) {
    ports[h].netns = netns[h];
    in_addr a{};
    if (inet_pton(AF_INET, addrs[h].c_str(), &a) != 1) fail("bad IPv4 address " + addrs[h]);
    ports[h].addr = a.s_addr;
    ports[h].fd = attach(netns[h], dev, home);
  }
  close(home);

  // Wake on time: a real-time priority (when allowed) and no timer slack, so a delivery is not
  // late behind the ranks' busy polling.
  prctl(PR_SET_TIMERSLACK, 1UL);
  sched_param priority{};
  priority.sched_priority = 10;
  sched_setscheduler(0, SCHED_FIFO, &priority);
  // SIGTERM and SIGINT arrive only inside ppoll (its mask), so none is lost between the check
  // of g_stop and the wait.
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  sigset_t blocked, waiting;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGTERM);
  sigaddset(&blocked, SIGINT);
  sigprocmask(SIG_BLOCK, &blocked, &waiting);
  sigdelset(&waiting, SIGTERM);
  sigdelset(&waiting, SIGINT);
  if (!ready.empty()) {
    FILE* f = std::fopen(ready.c_str(), "w");
    if (f == nullptr) fail("cannot write " + ready);
    std::fprintf(f, "%d\n", static_cast<int>(getpid()));
    std::fclose(f);
  }

  const double ns_per_byte = 8e9 / rate_bps;
  const auto delay_ns = static_cast<std::int64_t>(delay_us * 1e3);
  std::vector<pollfd> fds(ports.size());
  std::vector<std::uint8_t> buffer(65536);
  while (!g_stop) {
    std::int64_t now = now_ns();
    // Deliver what is due.
    std::int64_t next = -1;
    for (Port& port : ports) {
      while (!port.queue.empty() && port.queue.front().deliver_ns <= now) {
        const Packet& packet = port.queue.front();
        if (write(port.fd, packet.bytes.data(), packet.bytes.size()) < 0)
          ++port.dropped;  // the host's link is down (cut)
        else
          port.received_bytes += static_cast<std::int64_t>(packet.bytes.size());
        port.queue.pop_front();
      }
      if (!port.queue.empty() && (next < 0 || port.queue.front().deliver_ns < next))
        next = port.queue.front().deliver_ns;
    }
    for (std::size_t h = 0; h < ports.size(); ++h) fds[h] = {ports[h].fd, POLLIN, 0};
    timespec timeout{};
    timespec* wait = nullptr;
    if (next >= 0) {
      const std::int64_t left = std::max<std::int64_t>(next - now, 0);
      timeout.tv_sec = left / 1000000000;
      timeout.tv_nsec = left % 1000000000;
      wait = &timeout;
    }
    const int ready_fds = ppoll(fds.data(), fds.size(), wait, &waiting);
    if (ready_fds < 0) {
      if (errno == EINTR) continue;
      fail(std::string("ppoll: ") + std::strerror(errno));
    }
    now = now_ns();
    for (std::size_t h = 0; h < ports.size(); ++h) {
      if (!(fds[h].revents & POLLIN)) continue;
      Port& from = ports[h];
      for (;;) {
        const ssize_t n = read(from.fd, buffer.data(), buffer.size());
        if (n <= 0) break;
        const auto bytes = static_cast<std::int64_t>(n);
        // IPv4 only: version nibble 4, destination address at offset 16.
        if (n < 20 || (buffer[0] >> 4) != 4) {
          ++from.dropped;
          continue;
        }
        std::uint32_t dst = 0;
        std::memcpy(&dst, buffer.data() + 16, 4);
        auto to_it =
            std::find_if(ports.begin(), ports.end(), [&](const Port& p) { return p.addr == dst; });
        if (to_it == ports.end() || &*to_it == &from) {
          ++from.dropped;
          continue;
        }
        Port& to = *to_it;
        const auto serialize = static_cast<std::int64_t>(static_cast<double>(bytes) * ns_per_byte);
        // Either port's backlog past --queue-bytes drops (a switch's buffer per port).
        const auto backlog = [&](std::int64_t free_ns) {
          return static_cast<double>(std::max<std::int64_t>(free_ns - now, 0)) / ns_per_byte;
        };
        if (std::max(backlog(from.tx_free_ns), backlog(to.rx_free_ns - delay_ns)) +
                static_cast<double>(bytes) >
            queue_bytes) {
          ++from.dropped;
          continue;
        }
        const std::int64_t departed = std::max(now, from.tx_free_ns) + serialize;
        from.tx_free_ns = departed;
        const std::int64_t delivered = std::max(departed + delay_ns, to.rx_free_ns) + serialize;
        to.rx_free_ns = delivered;
        to.queue.push_back(
            {delivered, std::vector<std::uint8_t>(buffer.begin(), buffer.begin() + n)});
        from.sent_bytes += bytes;
        ++from.sent_packets;
      }
    }
  }
  for (const Port& port : ports)
    std::fprintf(stderr,
                 "canzona-wire: %s sent %lld bytes in %lld packets, received %lld bytes, "
                 "dropped %lld packets\n",
                 port.netns.c_str(), static_cast<long long>(port.sent_bytes),
                 static_cast<long long>(port.sent_packets),
                 static_cast<long long>(port.received_bytes), static_cast<long long>(port.dropped));
  return 0;
}
